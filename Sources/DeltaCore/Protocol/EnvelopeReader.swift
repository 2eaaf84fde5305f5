/// Reads the records of a response body `{"<collection>":[record,record,…]}` as it streams in.
///
/// The counterpart of `DeltaBodyWriter`. Memory stays bounded by the largest record plus one
/// chunk. Feed decoded (not gzip) bytes with `feed`, take records with `next`, and call `finish`
/// at the end of the body: only then is a truncated body told apart from a slow one.
public struct EnvelopeReader: Sendable {
    private static let whitespace: Set<UInt8> = [0x20, 0x09, 0x0A, 0x0D]
    /// Bytes held back from the record reader: enough to hold the closing `}` and trailing white space.
    private static let holdBack = 64

    private let collection: CollectionName
    private let prefix: [UInt8]
    private var header: [UInt8] = []
    private var started = false
    private var sawArray = false
    private var held: [UInt8] = []
    private var reader: RecordReader

    /// Creates a reader for a body of `collection`.
    public init(collection: CollectionName, limits: JSONLimits = .default) {
        self.collection = collection
        self.prefix = Array("{\"\(collection.rawValue)\":".utf8)
        self.reader = RecordReader(limits: limits)
    }

    /// How many records have been returned so far.
    public var count: Int { reader.count }

    /// Adds the next chunk of the body; fails at once when the body does not start as it should.
    public mutating func feed(_ chunk: some Collection<UInt8>) throws {
        var bytes = Array(chunk)
        if !started {
            header.append(contentsOf: bytes)
            let trimmed = header.drop { Self.whitespace.contains($0) }
            let compared = min(trimmed.count, prefix.count)
            guard trimmed.prefix(compared).elementsEqual(prefix.prefix(compared)) else {
                throw WireError(
                    .json, "the body is not {\"\(collection)\":[…]}",
                    evidence: "it starts \(String(reflecting: String(decoding: trimmed.prefix(40), as: UTF8.self)))")
            }
            guard trimmed.count >= prefix.count else { return }
            started = true
            bytes = Array(trimmed.dropFirst(prefix.count))
            header = []
        }
        if !sawArray, let first = bytes.first(where: { !Self.whitespace.contains($0) }) {
            guard first == UInt8(ascii: "[") else {
                throw WireError(
                    .json, "the body's \"\(collection)\" member is not an array",
                    evidence: "it holds \(String(reflecting: String(decoding: [first], as: UTF8.self)))…")
            }
            sawArray = true
        }
        held.append(contentsOf: bytes)
        if held.count > 2 * Self.holdBack {
            reader.feed(held.dropLast(Self.holdBack))
            held.removeFirst(held.count - Self.holdBack)
        }
    }

    /// The next complete record, or nil when more input is needed (or, after `finish`, at the end).
    public mutating func next() throws -> Record? {
        try reader.next()
    }

    /// Marks the end of the body: checks the closing brace, after which `next` drains the rest.
    public mutating func finish() throws {
        guard started, sawArray else {
            throw WireError(.json, "the body is empty or not {\"\(collection)\":[…]}", evidence: "\(header.count) bytes")
        }
        while let last = held.last, Self.whitespace.contains(last) { held.removeLast() }
        guard held.last == UInt8(ascii: "}") else {
            throw WireError(.json, "the body is truncated", evidence: "no closing brace after record \(reader.count)")
        }
        held.removeLast()
        reader.feed(held)
        held = []
        reader.finish()
    }
}

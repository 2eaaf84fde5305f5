/// Reads records incrementally from a JSON array (`[{…},{…}]`) or NDJSON (`{…}\n{…}`), fed in chunks.
///
/// Memory stays bounded by the largest record plus one chunk, so a file of a million records
/// is read without holding it whole. The format is chosen by the first non-white-space byte.
public struct RecordReader: Sendable {
    private enum Format: Sendable { case unknown, array, lines }
    private enum ArrayState: Sendable { case expectFirst, expectValue, expectSeparator, closed }

    private var buffer: [UInt8] = []
    private var offset = 0
    private var consumed = 0
    private var format: Format = .unknown
    private var arrayState: ArrayState = .expectFirst
    private var finished = false
    private let limits: JSONLimits
    /// How many records have been returned so far.
    public private(set) var count = 0

    /// Creates an empty reader.
    public init(limits: JSONLimits = .default) {
        self.limits = limits
    }

    /// Adds the next chunk of input.
    public mutating func feed(_ chunk: some Collection<UInt8>) {
        if offset > 0 && offset >= buffer.count / 2 {
            buffer.removeFirst(offset)
            consumed += offset
            offset = 0
        }
        buffer.append(contentsOf: chunk)
    }

    /// Marks the end of input: `next()` then fails on anything incomplete instead of waiting.
    public mutating func finish() {
        finished = true
    }

    /// The next record, or nil when more input is needed (or, after `finish()`, at the end).
    public mutating func next() throws -> Record? {
        skipWhitespace()
        if format == .unknown {
            guard offset < buffer.count else { return try endOrWait() }
            format = buffer[offset] == UInt8(ascii: "[") ? .array : .lines
            if format == .array { offset += 1 }
        }
        if format == .array {
            guard try advanceToArrayValue() else { return try endOrWait() }
        } else if offset >= buffer.count {
            return try endOrWait()
        }
        return try parseRecord()
    }

    private mutating func endOrWait() throws -> Record? {
        guard finished else { return nil }
        if format == .array && arrayState != .closed {
            throw WireError(.json, "the array is not closed", evidence: "input ended after \(count) records")
        }
        return nil
    }

    /// Moves past `[`, `,` or `]` in array mode; false when no value can be read yet (or the array ended).
    private mutating func advanceToArrayValue() throws -> Bool {
        while true {
            skipWhitespace()
            guard offset < buffer.count else { return false }
            let byte = buffer[offset]
            switch arrayState {
            case .closed:
                throw WireError(.json, "unexpected data after the array", evidence: "at byte \(consumed + offset)")
            case .expectFirst where byte == UInt8(ascii: "]"), .expectSeparator where byte == UInt8(ascii: "]"):
                offset += 1
                arrayState = .closed
                skipWhitespace()
                if offset < buffer.count {
                    throw WireError(.json, "unexpected data after the array", evidence: "at byte \(consumed + offset)")
                }
                return false
            case .expectSeparator:
                guard byte == UInt8(ascii: ",") else {
                    throw WireError(.json, "expected ',' or ']' between records", evidence: "at byte \(consumed + offset)")
                }
                offset += 1
                arrayState = .expectValue
            case .expectFirst, .expectValue:
                return true
            }
        }
    }

    private mutating func parseRecord() throws -> Record? {
        let position = consumed + offset
        let limits = self.limits
        let start = offset
        let outcome: (value: JSONValue?, end: Int, error: WireError?, atEnd: Bool) = buffer.withUnsafeBufferPointer { bytes in
            var parser = JSONParser(bytes, limits: limits, start: start)
            do {
                let value = try parser.parseValue()
                return (value, parser.index, nil, false)
            } catch let error as WireError {
                return (nil, parser.index, error, parser.failedAtEnd)
            } catch {
                return (nil, parser.index, WireError(.json, "\(error)"), false)
            }
        }
        guard let value = outcome.value else {
            if outcome.atEnd && !finished { return nil }
            let reason = outcome.error?.reason ?? "invalid JSON"
            throw WireError(.json, reason, evidence: "record \(count + 1), at byte \(consumed + outcome.end)", pointer: outcome.error?.pointer)
        }
        do {
            let record = try Record(ordered: value)
            offset = outcome.end
            count += 1
            if format == .array { arrayState = .expectSeparator }
            return record
        } catch let error as WireError {
            throw WireError(
                error.kind, error.reason, evidence: "record \(count + 1) at byte \(position)" + (error.evidence.map { ", \($0)" } ?? ""), pointer: error.pointer
            )
        }
    }

    private mutating func skipWhitespace() {
        while offset < buffer.count {
            switch buffer[offset] {
            case 0x20, 0x09, 0x0A, 0x0D: offset += 1
            default: return
            }
        }
    }
}

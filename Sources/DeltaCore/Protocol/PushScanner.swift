/// Reads a push body written the way `PushRequest.bytes` writes it (canonical JSON: members in
/// order, records as canonical bodies, ids and names without escapes, bases with their quotes
/// escaped) without building a JSON tree: the fast path of `POST /push`, where parsing took a
/// seventh of the server's time.
///
/// It only accepts a body that the full parser reads to the same `PushRequest`; for anything
/// else (another member order, an escape, a non-canonical record, a value the full parser would
/// refuse or mark invalid) it says nil and the full parser runs, which also words the error.
/// `PushScannerTests` compares the two on generated bodies and on altered ones.
struct PushScanner {
    private var scanner: CanonicalScanner
    /// The last base and collection read, as text and as bytes: a push's mutations mostly share them.
    private var base: (bytes: [UInt8], text: String)?
    private var collection: (bytes: [UInt8], name: CollectionName)?

    private init(_ bytes: UnsafeBufferPointer<UInt8>) { scanner = CanonicalScanner(bytes) }

    /// The client and mutations of `body`, or nil when the full parser must read it.
    static func scan(_ body: UnsafeBufferPointer<UInt8>) -> (client: String, mutations: [Mutation])? {
        var reader = PushScanner(body)
        return reader.push()
    }

    private mutating func push() -> (client: String, mutations: [Mutation])? {
        guard literal(#"{"client":"#), let client = plain(), !client.isEmpty, client.count <= PushRequest.maximumClientLength,
            !client.contains(0x7F), literal(#","mutations":["#)
        else { return nil }
        var mutations: [Mutation] = []
        repeat {
            guard let mutation = mutation() else { return nil }
            mutations.append(mutation)
        } while literal(",")
        guard literal("]}"), scanner.index == scanner.bytes.count else { return nil }
        return (String(decoding: client, as: UTF8.self), mutations)
    }

    /// The answer `body` when every result is `applied` or `unchanged`, written the way the
    /// server writes it (`{"lastMutationId":N,"results":[{"id":N,"status":"applied"},…]}`); nil
    /// otherwise, and the full parser reads it. The client's fast path for the common answer.
    static func scanAnswer(_ body: UnsafeBufferPointer<UInt8>) -> PushResponse? {
        var reader = PushScanner(body)
        guard reader.literal(#"{"lastMutationId":"#), let last = reader.positiveInteger(), reader.literal(#","results":["#) else { return nil }
        var results: [MutationResult] = []
        if !reader.literal("]") {
            repeat {
                guard reader.literal(#"{"id":"#), let id = reader.positiveInteger(), reader.literal(#","status":""#) else { return nil }
                if reader.literal(#"applied"}"#) {
                    results.append(MutationResult(id: id, status: .applied))
                } else if reader.literal(#"unchanged"}"#) {
                    results.append(MutationResult(id: id, status: .unchanged))
                } else {
                    return nil
                }
            } while reader.literal(",")
            guard reader.literal("]") else { return nil }
        }
        guard reader.literal("}") else { return nil }
        _ = reader.literal("\n")
        guard reader.scanner.index == body.count else { return nil }
        return PushResponse(lastMutationID: last, results: results)
    }

    /// `{"base":…,"collection":…,["create":true,]"id":…,"op":…,["record":…,]"recordId":…}`.
    private mutating func mutation() -> Mutation? {
        guard literal(#"{"base":"#) else { return nil }
        var base: String?
        if !literal("null") {
            // An entity tag holds quotes: it comes escaped, the canonical way.
            guard let (range, escaped) = string() else { return nil }
            let bytes = UnsafeBufferPointer(rebasing: scanner.bytes[range])
            if let known = self.base, known.bytes.elementsEqual(bytes) {
                base = known.text
            } else {
                let text = escaped ? String(decoding: scanner.decoded(range), as: UTF8.self) : String(decoding: bytes, as: UTF8.self)
                guard (try? Token(entityTag: text)) != nil else { return nil }
                self.base = (Array(bytes), text)
                base = text
            }
        }
        guard literal(#","collection":"#), let collection = collectionName() else { return nil }
        let create = literal(#","create":true"#)
        guard literal(#","id":"#), let id = positiveInteger(), literal(#","op":""#) else { return nil }
        if literal(#"delete","recordId":"#) {
            guard !create, let recordID = plain(), !recordID.isEmpty, recordID.count <= Record.maximumIDLength, literal("}") else { return nil }
            return Mutation(id: id, collection: collection, delete: String(decoding: recordID, as: UTF8.self), base: base)
        }
        guard literal(#"put","record":"#) else { return nil }
        let start = scanner.index
        guard let idRange = scanner.record() else { return nil }
        let body = Array(UnsafeBufferPointer(rebasing: scanner.bytes[start..<scanner.index]))
        guard literal(#","recordId":"#), let recordID = plain(), recordID.elementsEqual(scanner.bytes[idRange]), literal("}") else { return nil }
        let record = Record(id: String(decoding: recordID, as: UTF8.self), hidden: false, canonicalBody: body)
        return Mutation(id: id, collection: collection, put: record, base: base, create: create)
    }

    /// A collection name, the previous one's value when the bytes repeat.
    private mutating func collectionName() -> CollectionName? {
        guard let bytes = plain() else { return nil }
        if let known = collection, known.bytes.elementsEqual(bytes) { return known.name }
        guard let name = try? CollectionName(String(decoding: bytes, as: UTF8.self)) else { return nil }
        collection = (Array(bytes), name)
        return name
    }

    /// A string without escapes (valid UTF-8, no control bytes): its bytes.
    private mutating func plain() -> UnsafeBufferPointer<UInt8>? {
        guard let (range, escaped) = string(), !escaped else { return nil }
        return UnsafeBufferPointer(rebasing: scanner.bytes[range])
    }

    /// A string written the canonical way: where its bytes lie between the quotes, and whether they hold escapes.
    private mutating func string() -> (range: Range<Int>, escaped: Bool)? {
        guard scanner.index < scanner.bytes.count, scanner.bytes[scanner.index] == UInt8(ascii: "\"") else { return nil }
        let start = scanner.index + 1
        guard let escaped = scanner.string() else { return nil }
        return (start..<(scanner.index - 1), escaped)
    }

    /// Digits without a leading zero, from 1 to 2^53 (what `Mutation` accepts as an id).
    private mutating func positiveInteger() -> UInt64? {
        var value: UInt64 = 0
        let start = scanner.index
        while scanner.index < scanner.bytes.count, case let byte = scanner.bytes[scanner.index], byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") {
            guard scanner.index - start < 16, !(scanner.index == start && byte == UInt8(ascii: "0")) else { return nil }
            value = value * 10 + UInt64(byte - UInt8(ascii: "0"))
            scanner.index += 1
        }
        guard scanner.index > start, value >= 1, value <= 1 << 53 else { return nil }
        return value
    }

    /// Consumes `text` when the bytes at the index are exactly it.
    private mutating func literal(_ text: StaticString) -> Bool {
        let count = text.utf8CodeUnitCount
        guard scanner.index + count <= scanner.bytes.count else { return false }
        for offset in 0..<count where scanner.bytes[scanner.index + offset] != text.utf8Start[offset] { return false }
        scanner.index += count
        return true
    }
}

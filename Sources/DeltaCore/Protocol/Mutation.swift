/// One write an app made offline, as it travels in a push (`POST /push`, docs/PROTOCOL.md).
///
/// `id` counts up by one per client from 1; `base` is the collection's `ETag` the app held when
/// it made the edit, so the server can tell whether its copy changed since.
public struct Mutation: Sendable, Equatable {
    /// What the mutation does to its record.
    public enum Operation: String, Sendable {
        /// Create or replace the record.
        case put
        /// Hide the record (it stays as a tombstone).
        case delete
    }

    /// The client's mutation id: 1, 2, 3, … without gaps.
    public let id: UInt64
    /// The collection written.
    public let collection: CollectionName
    /// Put or delete.
    public let operation: Operation
    /// The record's id.
    public let recordID: String
    /// The record to put; nil for a delete, or when the pushed value is not a record (`problem` says why).
    /// A put with both a record and a `problem` is one the server refuses for a limit of its own.
    public let record: Record?
    /// Why the pushed record cannot be stored, when it cannot: the server answers `invalid`.
    public let problem: String?
    /// The collection `ETag` at which the app last saw the server's copy of the record (the one it
    /// held when it made the edit, or when an earlier local edit of the record is still
    /// unconfirmed, that edit's base); nil when it held none.
    public let base: String?
    /// `base` parsed (nil when there is none, or when it is not a token of this protocol); parsed
    /// on each use, since a push's mutations mostly share one base.
    public var baseToken: Token? { base.flatMap { try? Token(entityTag: $0) } }
    /// Whether the app created the record (it had no copy of it): over an existing record this is a conflict.
    public let create: Bool

    /// A put of `record`.
    public init(id: UInt64, collection: CollectionName, put record: Record, base: String?, create: Bool = false) {
        self.init(
            id: id, collection: collection, operation: .put, recordID: record.id, record: record, problem: nil,
            base: base, create: create)
    }

    /// A delete of `recordID`.
    public init(id: UInt64, collection: CollectionName, delete recordID: String, base: String?) {
        self.init(
            id: id, collection: collection, operation: .delete, recordID: recordID, record: nil, problem: nil,
            base: base, create: false)
    }

    init(
        id: UInt64, collection: CollectionName, operation: Operation, recordID: String, record: Record?, problem: String?,
        base: String?, create: Bool
    ) {
        self.id = id
        self.collection = collection
        self.operation = operation
        self.recordID = recordID
        self.record = record
        self.problem = problem
        self.base = base
        self.create = create
    }

    /// Reads one element of a push's `mutations` array. An envelope that does not follow the
    /// protocol throws; a put whose record is unusable parses, with `problem` set.
    public init(value: JSONValue) throws {
        var checked: Set<String> = []
        try self.init(value: value, checkedBases: &checked)
    }

    /// Reads one mutation; `checkedBases` holds the bases already found valid in the same push.
    init(value: JSONValue, checkedBases: inout Set<String>) throws {
        guard case .object = value else { throw WireError(.push, "a mutation must be a JSON object", evidence: "found \(value.kindName)") }
        let id = try Self.positiveInteger(value["id"], "\"id\"")
        func field(_ name: String) throws -> String {
            guard case .string(let text)? = value[name] else {
                throw WireError(.push, "mutation \(id): \"\(name)\" must be a string", evidence: value[name].map { "found \($0.kindName)" } ?? "missing")
            }
            return text
        }
        let collection: CollectionName
        do { collection = try CollectionName(try field("collection")) } catch let error as WireError where error.kind == .collectionName {
            throw WireError(.push, "mutation \(id): \"collection\" is not a collection name", evidence: error.description)
        }
        guard let operation = Operation(rawValue: try field("op")) else {
            throw WireError(.push, "mutation \(id): \"op\" must be \"put\" or \"delete\"", evidence: String(reflecting: try field("op")))
        }
        var base: String?
        if let given = value["base"], given != .null {
            guard case .string(let text) = given, checkedBases.contains(text) || (try? Token(entityTag: text)) != nil else {
                throw WireError(
                    .push, "mutation \(id): \"base\" must be an ETag this protocol issues, or null",
                    evidence: String(decoding: given.canonicalBytes.prefix(80), as: UTF8.self))
            }
            checkedBases.insert(text)
            base = text
        }
        var create = false
        if let flag = value["create"] {
            guard case .bool(let set) = flag else {
                throw WireError(.push, "mutation \(id): \"create\" must be true or false", evidence: "found \(flag.kindName)")
            }
            create = set
        }
        switch operation {
        case .delete:
            let recordID = try field("recordId")
            do { try Record.validate(id: recordID) } catch let error as WireError {
                throw WireError(.push, "mutation \(id): \"recordId\" is not a record id", evidence: error.description)
            }
            guard value["record"] == nil || value["record"] == .null else { throw WireError(.push, "mutation \(id): a delete carries no \"record\"") }
            self.init(id: id, collection: collection, operation: .delete, recordID: recordID, record: nil, problem: nil, base: base, create: false)
        case .put:
            guard let pushed = value["record"] else { throw WireError(.push, "mutation \(id): a put needs a \"record\"") }
            let named: String? = try value["recordId"].map { _ in try field("recordId") }
            var record: Record?
            var problem: String?
            if case .object(let members) = pushed, members.contains(where: { $0.key == "hidden" }) {
                problem = "a pushed record must not carry \"hidden\" (use op \"delete\")"
            } else {
                do { record = try Record(value: pushed) } catch let error as WireError { problem = error.description }
            }
            if let record, let named, named != record.id {
                problem = "\"recordId\" differs from the record's \"id\" (\(String(reflecting: named)), \(String(reflecting: record.id)))"
            }
            let recordID = record?.id ?? named ?? ""
            self.init(
                id: id, collection: collection, operation: .put, recordID: recordID, record: problem == nil ? record : nil, problem: problem, base: base,
                create: create)
        }
    }

    /// The mutation as it is sent, in canonical JSON.
    public var json: JSONValue {
        // Parsing what `write(into:)` writes keeps one definition of the form.
        var bytes: [UInt8] = []
        write(into: &bytes)
        return (try? JSONValue(parsing: bytes, limits: JSONLimits.default.enclosing(1))) ?? .null
    }

    /// Appends the mutation's canonical JSON to `out`, the record's canonical body as it is.
    public func write(into out: inout [UInt8]) {
        out.append(contentsOf: Array(#"{"base":"#.utf8))
        if let base { JSONValue.writeString(base, into: &out) } else { out.append(contentsOf: Array("null".utf8)) }
        out.append(contentsOf: Array(#","collection":"#.utf8))
        JSONValue.writeString(collection.rawValue, into: &out)
        if create { out.append(contentsOf: Array(#","create":true"#.utf8)) }
        out.append(contentsOf: Array(#","id":\#(id),"op":"\#(operation.rawValue)""#.utf8))
        if let record {
            out.append(contentsOf: Array(#","record":"#.utf8))
            out.append(contentsOf: record.body)
        }
        out.append(contentsOf: Array(#","recordId":"#.utf8))
        JSONValue.writeString(recordID, into: &out)
        out.append(UInt8(ascii: "}"))
    }

    /// SHA-256 of what the mutation asks for: a repeated id with another digest is a different payload.
    /// The hashed text is `op\ncollection\nrecordId\nbase\ncreate\n` then the body (or the problem);
    /// recorded runs keep these digests, so the text never changes.
    public var digest: [UInt8] {
        var text: [UInt8] = []
        text.reserveCapacity(recordID.utf8.count + (base?.utf8.count ?? 0) + (record?.body.count ?? 0) + 64)
        for part in [operation.rawValue, collection.rawValue, recordID, base ?? "", create ? "true" : "false"] {
            text.append(contentsOf: part.utf8)
            text.append(0x0A)
        }
        if let record { text.append(contentsOf: record.body) } else { text.append(contentsOf: (problem ?? "").utf8) }
        return SHA256.hash(text)
    }

    /// A JSON number that is a whole number from 1 to 2^53 (what every JSON reader holds exactly).
    static func positiveInteger(_ value: JSONValue?, _ name: String) throws -> UInt64 {
        guard case .number(let text)? = value, let number = UInt64(text), number >= 1, number <= 1 << 53 else {
            throw WireError(
                .push, "\(name) must be a whole number from 1 to 2^53",
                evidence: value.map { String(decoding: $0.canonicalBytes.prefix(40), as: UTF8.self) } ?? "missing")
        }
        return number
    }
}

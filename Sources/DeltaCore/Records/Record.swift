/// A record: a JSON object with a string `"id"`, keyed by (collection, id), visible or hidden.
///
/// `body` holds the canonical JSON of the object without its `"hidden"` member; hiding is
/// carried by `hidden` instead, so a record can be hidden and brought back without changing
/// its content.
public struct Record: Sendable, Equatable {
    /// The longest id accepted, in UTF-8 bytes.
    public static let maximumIDLength = 512

    /// The record's id: the value of its `"id"` member.
    public let id: String
    /// Whether the record is a tombstone (`"hidden": true` on the wire).
    public var hidden: Bool
    /// The canonical JSON of the object, without any `"hidden"` member.
    public let body: [UInt8]

    /// Creates a record from trusted canonical bytes (as stored); no validation.
    public init(id: String, hidden: Bool, canonicalBody: [UInt8]) {
        self.id = id
        self.hidden = hidden
        self.body = canonicalBody
    }

    /// Parses one JSON object as a record; a `"hidden"` member, when present, must be a boolean.
    public init(parsing json: some Collection<UInt8>, limits: JSONLimits = .default) throws {
        try self.init(ordered: JSONValue(parsing: json, limits: limits))
    }

    /// Makes a record of a JSON value, which must be an object with a string `"id"`; its members
    /// are put in canonical order (the parser's values already are; built ones may not be).
    public init(value: JSONValue) throws {
        if case .object(let members) = value,
            !zip(members, members.dropFirst()).allSatisfy({ $0.key.utf8.lexicographicallyPrecedes($1.key.utf8) })
        {
            try self.init(ordered: .object(members.sorted { $0.key.utf8.lexicographicallyPrecedes($1.key.utf8) }))
        } else {
            try self.init(ordered: value)
        }
    }

    /// Makes a record of a value whose object members are already in canonical order, as the
    /// parser produces them: the hot path of imports and snapshot reads skips the order check.
    init(ordered value: JSONValue) throws {
        guard case .object(var members) = value else {
            throw WireError(.record, "must be a JSON object", evidence: "found \(value.kindName)")
        }
        guard let idIndex = members.firstIndex(where: { $0.key == "id" }) else {
            throw WireError(.record, "missing the \"id\" member")
        }
        guard case .string(let id) = members[idIndex].value else {
            throw WireError(.record, "\"id\" must be a string", evidence: "found \(members[idIndex].value.kindName)")
        }
        try Record.validate(id: id)
        var hidden = false
        if let hiddenIndex = members.firstIndex(where: { $0.key == "hidden" }) {
            guard case .bool(let flag) = members[hiddenIndex].value else {
                throw WireError(
                    .record, "\"hidden\" must be true or false",
                    evidence: "record \(String(reflecting: id)) has \(members[hiddenIndex].value.kindName)")
            }
            hidden = flag
            members.remove(at: hiddenIndex)
        }
        self.id = id
        self.hidden = hidden
        self.body = JSONValue.object(members).canonicalBytes
    }

    /// Checks that `id` is usable as a record id: 1 to 512 UTF-8 bytes, no NUL.
    ///
    /// NUL is refused at the door rather than stored: PostgreSQL's text cannot hold it, and C
    /// APIs that read text up to a NUL would see `"n-1\u{0}"` as `"n-1"`.
    public static func validate(id: String) throws {
        let length = id.utf8.count
        guard length > 0 else { throw WireError(.record, "\"id\" must not be empty") }
        guard length <= maximumIDLength else {
            throw WireError(.record, "\"id\" is longer than \(maximumIDLength) bytes", evidence: "\(length) bytes")
        }
        guard !id.utf8.contains(0) else {
            throw WireError(.record, "\"id\" must not contain NUL (U+0000)", evidence: String(reflecting: id))
        }
    }

    /// The record as it goes on the wire: the body, with `"hidden":true` first when hidden.
    public var wireJSON: [UInt8] {
        var out: [UInt8] = []
        Record.appendWire(body: body, hidden: hidden, to: &out)
        return out
    }

    /// Appends a stored body to `out` in wire form: hidden records get `"hidden":true` as their first member.
    public static func appendWire(body: some Collection<UInt8>, hidden: Bool, to out: inout [UInt8]) {
        if hidden {
            out.append(contentsOf: hiddenPrefix)
            out.append(contentsOf: body.dropFirst())
        } else {
            out.append(contentsOf: body)
        }
    }

    /// The canonical body of a tombstone that says only which record left: `{"id":"…"}`.
    ///
    /// A row that leaves a user's rule is sent as this, never with its content: the user may not
    /// read what it says now (docs/PROTOCOL.md, "Users and rules"), and a replica needs nothing
    /// but the id to delete it.
    public static func bareBody(id: String) -> [UInt8] {
        var out: [UInt8] = Array("{\"id\":".utf8)
        JSONValue.writeString(id, into: &out)
        out.append(UInt8(ascii: "}"))
        return out
    }

    /// `{"hidden":true,`: a stored body always has at least its `"id"` member, so a comma follows.
    static let hiddenPrefix: [UInt8] = Array("{\"hidden\":true,".utf8)
}

extension JSONValue {
    /// A short name of the value's JSON type, for error messages.
    public var kindName: String {
        switch self {
        case .null: return "null"
        case .bool: return "a boolean"
        case .number: return "a number"
        case .string: return "a string"
        case .array: return "an array"
        case .object: return "an object"
        }
    }
}

/// The body of `POST /push`: one client's mutations, in the order it made them (docs/PROTOCOL.md).
public struct PushRequest: Sendable, Equatable {
    /// The longest client id accepted, in UTF-8 bytes.
    public static let maximumClientLength = 200

    /// The client's id: chosen once by the app (a UUID), kept across launches.
    public let client: String
    /// The mutations, ids strictly consecutive.
    public let mutations: [Mutation]

    /// A push of `mutations` from `client`.
    public init(client: String, mutations: [Mutation]) {
        self.client = client
        self.mutations = mutations
    }

    /// Parses and checks a push body: a client id, and at least one mutation, ids consecutive.
    /// A body in the canonical form `bytes` writes takes a fast path (`PushScanner`).
    public init(parsing bytes: some Collection<UInt8>) throws {
        if let (client, mutations) = bytes.withContiguousStorageIfAvailable(PushScanner.scan) ?? nil {
            try Self.checkSequence(mutations)
            self.init(client: client, mutations: mutations)
        } else {
            try self.init(fullyParsing: bytes)
        }
    }

    /// Parses a push body with the JSON parser: any member order and spelling, every error worded.
    init(fullyParsing bytes: some Collection<UInt8>) throws {
        let value: JSONValue
        // The records sit four levels deep: {"mutations":[{"record":{…}}]}.
        do { value = try JSONValue(parsing: bytes, limits: JSONLimits.default.enclosing(3)) } catch let error as WireError {
            throw WireError(.push, "the body is not JSON", evidence: error.description)
        }
        guard case .object = value else { throw WireError(.push, "the body must be a JSON object", evidence: "found \(value.kindName)") }
        guard case .string(let client)? = value["client"], !client.isEmpty, client.utf8.count <= Self.maximumClientLength,
            client.unicodeScalars.allSatisfy({ $0.value >= 0x20 && $0.value != 0x7F })
        else {
            throw WireError(
                .push, "\"client\" must be a string of 1 to \(Self.maximumClientLength) bytes without control characters",
                evidence: value["client"].map { $0.kindName } ?? "missing")
        }
        guard case .array(let items)? = value["mutations"], !items.isEmpty else {
            throw WireError(.push, "\"mutations\" must be a non-empty array", evidence: value["mutations"].map { $0.kindName } ?? "missing")
        }
        var checkedBases: Set<String> = []
        let mutations = try items.map { try Mutation(value: $0, checkedBases: &checkedBases) }
        try Self.checkSequence(mutations)
        self.init(client: client, mutations: mutations)
    }

    /// Ids must count up by one.
    private static func checkSequence(_ mutations: [Mutation]) throws {
        for (previous, next) in zip(mutations, mutations.dropFirst()) where next.id != previous.id + 1 {
            throw WireError(.push, "mutation ids must count up by one", evidence: "\(previous.id) then \(next.id)")
        }
    }

    /// The body to send, canonical JSON.
    public var bytes: [UInt8] {
        var out = Array(#"{"client":"#.utf8)
        JSONValue.writeString(client, into: &out)
        out.append(contentsOf: Array(#","mutations":["#.utf8))
        for (index, mutation) in mutations.enumerated() {
            if index > 0 { out.append(UInt8(ascii: ",")) }
            mutation.write(into: &out)
        }
        out.append(contentsOf: Array("]}".utf8))
        return out
    }
}

/// What the server did with one mutation.
public struct MutationResult: Sendable, Equatable {
    /// The outcome.
    public enum Status: String, Sendable {
        /// Written, at a new position.
        case applied
        /// The server already held exactly what the mutation asks for: nothing written.
        case unchanged
        /// Not written: the server's copy changed since the mutation's base; `server` holds it.
        case conflict
        /// Not written: the pushed value is not a record (`reason` says why).
        case invalid
        /// Not written: the pusher may write nothing in the collection (`rule` `collection`),
        /// the user's rules do not allow it (`rule` says which rule decided), or
        /// (`rule` `read`) a record the pusher may not read holds the id and writing it would
        /// overwrite a version the pusher has not seen; `server` is what the pusher may read of
        /// the server's record, else null.
        case denied
    }

    /// Why a mutation is a conflict.
    public enum ConflictReason: String, Sendable, CaseIterable {
        /// The server's copy was edited after the base.
        case changed
        /// The server hid (deleted) the record after the base.
        case hidden
        /// The app created a record whose id the server already has.
        case exists
        /// The base names no commit this server holds (another database, or history it dropped).
        case unknownBase = "unknown-base"
    }

    /// The mutation's id.
    public let id: UInt64
    /// The outcome.
    public let status: Status
    /// For a conflict, a `ConflictReason` raw value; for an invalid mutation, why.
    public let reason: String?
    /// For a conflict: the server's current record (`hidden` when hidden), nil when it has none;
    /// only ever what the pusher may read of it.
    public let server: Record?
    /// For a conflict: the collection `ETag` at which `server` is current, the base to send a
    /// resolution with.
    public let base: String?

    /// For a denied mutation: the rule that refused it, `collection` (the pusher may write
    /// nothing there), `write`, `create`, `update` or `delete`;
    /// `read` when the pusher may not read the record stored under the id.
    public let rule: String?

    /// Creates a result.
    public init(id: UInt64, status: Status, reason: String? = nil, server: Record? = nil, base: String? = nil, rule: String? = nil) {
        self.id = id
        self.status = status
        self.reason = reason
        self.server = server
        self.base = base
        self.rule = rule
    }

    /// The result in canonical JSON, as the server sends and stores it.
    public var json: JSONValue {
        var members: [JSONMember] = []
        if let base { members.append(JSONMember(key: "base", value: .string(base))) }
        members.append(JSONMember(key: "id", value: .number(String(id))))
        if let reason { members.append(JSONMember(key: "reason", value: .string(reason))) }
        if let rule { members.append(JSONMember(key: "rule", value: .string(rule))) }
        if let server, let value = try? JSONValue(parsing: server.wireJSON) {
            members.append(JSONMember(key: "server", value: value))
        } else if status == .denied {
            members.append(JSONMember(key: "server", value: .null))
        }
        members.append(JSONMember(key: "status", value: .string(status.rawValue)))
        return .object(members)
    }

    /// Reads one element of a push answer's `results`.
    public init(value: JSONValue) throws {
        let id = try Mutation.positiveInteger(value["id"], "result \"id\"")
        guard case .string(let text)? = value["status"], let status = Status(rawValue: text) else {
            throw WireError(.push, "result \(id): \"status\" must be applied, unchanged, conflict, invalid or denied")
        }
        var reason: String?
        if case .string(let text)? = value["reason"] { reason = text }
        var base: String?
        if case .string(let text)? = value["base"] { base = text }
        var rule: String?
        if case .string(let text)? = value["rule"] { rule = text }
        var server: Record?
        if let record = value["server"], record != .null {
            do { server = try Record(value: record) } catch let error as WireError {
                throw WireError(.push, "result \(id): \"server\" is not a record", evidence: error.description)
            }
        }
        self.init(id: id, status: status, reason: reason, server: server, base: base, rule: rule)
    }
}

/// The answer to `POST /push`: the client's last mutation id the server has recorded, and one
/// result per mutation sent.
public struct PushResponse: Sendable, Equatable {
    /// The highest mutation id of this client the server has applied or answered.
    public let lastMutationID: UInt64
    /// One result per mutation, in order.
    public let results: [MutationResult]

    /// Creates an answer.
    public init(lastMutationID: UInt64, results: [MutationResult]) {
        self.lastMutationID = lastMutationID
        self.results = results
    }

    /// The answer in canonical JSON.
    public var json: JSONValue {
        .object([
            JSONMember(key: "lastMutationId", value: .number(String(lastMutationID))),
            JSONMember(key: "results", value: .array(results.map(\.json))),
        ])
    }

    /// Parses an answer; one whose results all applied, as the server writes it, takes a fast path.
    public init(parsing bytes: some Collection<UInt8>) throws {
        if let answer = bytes.withContiguousStorageIfAvailable(PushScanner.scanAnswer) ?? nil {
            self = answer
            return
        }
        try self.init(fullyParsing: bytes)
    }

    /// Parses an answer with the JSON parser.
    init(fullyParsing bytes: some Collection<UInt8>) throws {
        // A conflict's server record sits four levels deep: {"results":[{"server":{…}}]}.
        let value = try JSONValue(parsing: bytes, limits: JSONLimits.default.enclosing(3))
        guard case .number(let text)? = value["lastMutationId"], let last = UInt64(text) else {
            throw WireError(.push, "the answer has no \"lastMutationId\"")
        }
        guard case .array(let items)? = value["results"] else { throw WireError(.push, "the answer has no \"results\" array") }
        self.init(lastMutationID: last, results: try items.map { try MutationResult(value: $0) })
    }
}

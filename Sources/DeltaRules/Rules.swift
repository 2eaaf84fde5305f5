import DeltaCore

/// The rules file of `deltasnap serve --rules`: per collection, what each user may read and
/// write (docs/PROTOCOL.md, "Users and rules"). A collection the file does not name is the
/// owner's alone: deny by default.
///
/// ```json
/// {"collections": {
///   "airports": {"read": true},
///   "notes": {"read":  {"owner": {"eq": {"$claim": "sub"}}},
///             "write": {"owner": {"eq": {"$claim": "sub"}}},
///             "stamp": {"owner": {"$claim": "sub"}}}
/// }}
/// ```
public struct Rules: Sendable, Equatable {
    /// The rule of each collection named, by name.
    public let collections: [String: CollectionRule]
    /// The file's canonical JSON (sorted keys, no white space): equal rules, equal bytes.
    public let canonical: [UInt8]

    /// The largest rules file accepted.
    public static let maximumBytes = 1 << 20

    /// 16 hex digits of SHA-256 over `canonical`: equal rules, equal digests.
    public var digest: String {
        SHA256.shortHex(canonical)
    }

    /// The rule of `collection`; nil when the file does not name it (the owner's alone).
    public func rule(for collection: CollectionName) -> CollectionRule? { collections[collection.rawValue] }

    /// Whether the rules let some user write something in `collection`: it is named, and its
    /// `create`, `update` or `delete` (each `write` when left out) is not `nobody`.
    public func givesWrites(to collection: CollectionName) -> Bool {
        guard let rule = rule(for: collection) else { return false }
        return [rule.create ?? rule.write, rule.update ?? rule.write, rule.delete ?? rule.write].contains { $0 != .nobody }
    }

    /// Whether everyone may read `collection`, with or without a token.
    public func isPublic(_ collection: CollectionName) -> Bool { rule(for: collection)?.read == .everyone }

    /// Parses a rules file; an error names the place in it as a JSON Pointer (`/collections/notes/read/owner`).
    public init(parsing bytes: some Collection<UInt8>) throws {
        guard bytes.count <= Self.maximumBytes else {
            throw WireError(.rules, "the file is larger than \(Self.maximumBytes) bytes", evidence: "\(bytes.count) bytes")
        }
        let value: JSONValue
        do { value = try JSONValue(parsing: bytes) } catch let error as WireError { throw WireError(.rules, "not valid JSON", evidence: error.description) }
        try self.init(json: value)
    }

    /// Parses rules from their JSON value.
    public init(json value: JSONValue) throws {
        guard case .object(let top) = value, top.count == 1, top[0].key == "collections", case .object(let entries) = top[0].value else {
            throw WireError(.rules, "the file is {\"collections\": {NAME: RULE, …}}", evidence: RuleFilter.shown(value))
        }
        var collections: [String: CollectionRule] = [:]
        for entry in entries {
            do {
                guard (try? CollectionName(entry.key)) != nil else {
                    throw WireError(.rules, "not a collection name ([A-Za-z0-9_-], 1 to 64)", evidence: String(reflecting: String(entry.key.prefix(70))))
                }
                collections[entry.key] = try Self.rule(entry.value)
            } catch let error as WireError {
                throw error.within(entry.key).within("collections")
            }
        }
        self.collections = collections
        self.canonical = value.canonicalBytes
    }

    private static let keys: Set<String> = ["read", "write", "create", "update", "delete", "stamp"]

    private static func rule(_ value: JSONValue) throws -> CollectionRule {
        guard case .object(let members) = value else {
            throw WireError(.rules, "a collection's rule is an object with read, write, create, update, delete, stamp", evidence: RuleFilter.shown(value))
        }
        if let unknown = members.first(where: { !keys.contains($0.key) }) {
            throw WireError(
                .rules, "unknown key (use read, write, create, update, delete, stamp)", evidence: String(reflecting: String(unknown.key.prefix(40))))
        }
        func access(_ key: String) throws -> CollectionRule.Access? {
            guard let given = value[key] else { return nil }
            do {
                switch given {
                case .bool(true): return .everyone
                case .bool(false): return .nobody
                case .object: return .when(try RuleFilter(json: given))
                default: throw WireError(.rules, "true, false or a filter", evidence: RuleFilter.shown(given))
                }
            } catch let error as WireError {
                throw error.within(key)
            }
        }
        var stamp: [(member: String, claim: String)] = []
        if let given = value["stamp"] {
            guard case .object(let stamps) = given else {
                throw WireError(.rules, "{MEMBER: {\"$claim\": NAME}, …}", evidence: RuleFilter.shown(given)).within("stamp")
            }
            for item in stamps {
                guard item.key != "id", case .object(let inner) = item.value, inner.count == 1, inner[0].key == "$claim",
                    case .string(let claim) = inner[0].value, !claim.isEmpty
                else {
                    throw WireError(.rules, "a stamp sets a member other than \"id\" to {\"$claim\": NAME}", evidence: RuleFilter.shown(item.value)).within(
                        item.key
                    ).within("stamp")
                }
                stamp.append((item.key, claim))
            }
        }
        return CollectionRule(
            read: try access("read") ?? .nobody, write: try access("write") ?? .nobody, create: try access("create"), update: try access("update"),
            delete: try access("delete"), stamp: stamp)
    }
}

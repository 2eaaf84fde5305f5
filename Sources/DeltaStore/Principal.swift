public import DeltaCore
public import DeltaRules

/// Who makes a write (docs/PROTOCOL.md, "Who may push", "Users and rules"): what it may read
/// decides what its answers show (conflicts, denials, `412` bodies), and a push client id
/// belongs to the one principal that first pushed with it.
public enum Principal: Sendable {
    /// The data owner's secret: reads and writes everything, hidden records too.
    case owner
    /// The apps' client key: reads what everyone reads, every record of a collection the
    /// `rules` (nil: none) leave public, nothing of one they restrict; writes the collections
    /// named in `writable` (the server's `--client-writable`) and no others.
    case clientKey(rules: Rules?, writable: Set<String>)
    /// A signed-in user, whose reads and writes the rules decide.
    case user(UserWrite)

    /// The push ledger's name for the owner.
    public static let ownerName = "owner"
    /// The push ledger's name for the client key.
    public static let clientKeyName = "client"

    /// The push ledger's name for the user whose `sub` is `subject`: `user:` and the `sub`, so
    /// that no user's name is the owner's or the client key's.
    public static func userName(_ subject: String) -> String { "user:" + subject }

    /// How the push ledger names this principal: `owner`, `client`, or `user:` and the `sub`.
    public var ledgerName: String {
        switch self {
        case .owner: return Self.ownerName
        case .clientKey: return Self.clientKeyName
        case .user(let user): return Self.userName(user.claims.subject)
        }
    }

    /// The user's `sub`, nil for the owner and the client key.
    public var subject: String? {
        if case .user(let user) = self { return user.claims.subject }
        return nil
    }

    /// The rule a `denied` result names when the principal may write nothing in the collection
    /// (`mayWrite`): the client key on a collection not in `--client-writable`, a user on one
    /// the rules give no writes.
    public static let collectionRule = "collection"

    /// Whether this principal may write anything at all in `collection`: the owner everywhere,
    /// the client key in its `writable` collections, a user where the rules give a `write`,
    /// `create`, `update` or `delete` that is not `nobody`. One record's write is decided after
    /// this (`decide`).
    public func mayWrite(_ collection: CollectionName) -> Bool {
        switch self {
        case .owner: return true
        case .clientKey(_, let writable): return writable.contains(collection.rawValue)
        case .user(let user): return user.rules.givesWrites(to: collection)
        }
    }

    /// Decides a `put` of `record` (nil: a `delete`) over `stored` in `collection`, as
    /// `UserWrite.decide` does for a user; the owner and the client key may write what they
    /// reach (the server checked the collection), and see all of `stored` or, for the client
    /// key on a collection the rules restrict, nothing of it.
    public func decide(
        _ collection: CollectionName, put record: Record?, stored: Record?, in ledger: any PushLedger, context: inout UserWrite.Context
    ) async throws -> UserWrite.Verdict {
        switch self {
        case .owner:
            return .allowed(record, visible: stored)
        case .clientKey(let rules, _):
            return .allowed(record, visible: rules.map { $0.isPublic(collection) } == false ? nil : stored)
        case .user(let user):
            return try await user.decide(collection, put: record, stored: stored, in: ledger, context: &context)
        }
    }
}

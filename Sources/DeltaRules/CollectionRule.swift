import DeltaCore

/// What users may do with one collection (docs/PROTOCOL.md, "Users and rules").
public struct CollectionRule: Sendable, Equatable {
    /// Who may do something: everyone (`true`: for `read`, with or without a token; for writes,
    /// every signed-in user, since only a user's token writes under rules), the users for whom a
    /// filter holds, or nobody (`false`, or the key left out).
    public enum Access: Sendable, Equatable {
        /// `true`: everyone, with or without a token.
        case everyone
        /// A filter: the rows for which it holds, for the user asking.
        case when(RuleFilter)
        /// Nobody but the owner.
        case nobody
    }

    /// The rows a user sees. `.everyone`: public data, cacheable as without rules.
    public let read: Access
    /// What a user may write: must hold for the stored record and for the record after a `put`.
    public let write: Access
    /// Overrides `write` for a `put` of an id the collection does not hold. A hidden record is
    /// held: a `put` over it is an update, never a create.
    public let create: Access?
    /// Overrides `write` for a `put` over a stored record, visible or hidden.
    public let update: Access?
    /// Overrides `write` for a `delete`.
    public let delete: Access?
    /// Members the server sets from the token on every `put` by a user: member name and claim name.
    public let stamp: [(member: String, claim: String)]

    /// Equal rules.
    public static func == (lhs: CollectionRule, rhs: CollectionRule) -> Bool {
        lhs.read == rhs.read && lhs.write == rhs.write && lhs.create == rhs.create && lhs.update == rhs.update && lhs.delete == rhs.delete
            && lhs.stamp.map(\.member) == rhs.stamp.map(\.member) && lhs.stamp.map(\.claim) == rhs.stamp.map(\.claim)
    }

    /// The access deciding `operation`: its override when the rule has one, else `write`; and
    /// the name of the rule that decided (`create`, `update`, `delete` or `write`).
    public func access(for operation: WriteOperation) -> (access: Access, rule: String) {
        let override: Access?
        switch operation {
        case .create: override = create
        case .update: override = update
        case .delete: override = delete
        }
        if let override { return (override, operation.rawValue) }
        return (write, "write")
    }

    /// The filters of the accesses that are rules: read, write, then create, update and delete when set.
    public var filters: [RuleFilter] {
        ([read, write] + [create, update, delete].compactMap { $0 }).compactMap { access in
            if case .when(let filter) = access { return filter }
            return nil
        }
    }

    /// Every `$rows` source these rules read, in the order of `filters` (one read twice is listed twice).
    public var sources: [RowsSource] { filters.flatMap(\.sources) }

    /// Every claim these rules read, stamps included.
    public var claims: [String] {
        var names: [String] = []
        for filter in filters { names += filter.claims.filter { !names.contains($0) } }
        return names + stamp.map(\.claim).filter { !names.contains($0) }
    }

    /// The claims the read rule reads: what a user's sync token is bound to.
    public var readClaims: [String] {
        if case .when(let filter) = read { return filter.claims }
        return []
    }

    /// Creates a rule.
    public init(read: Access, write: Access, create: Access? = nil, update: Access? = nil, delete: Access? = nil, stamp: [(member: String, claim: String)] = [])
    {
        self.read = read
        self.write = write
        self.create = create
        self.update = update
        self.delete = delete
        self.stamp = stamp
    }
}

/// What a write does to a record, as a rule sees it.
public enum WriteOperation: String, Sendable, Equatable, CaseIterable {
    /// A `put` of an id the collection does not hold.
    case create
    /// A `put` over a stored record, visible or hidden.
    case update
    /// A `delete`.
    case delete
}

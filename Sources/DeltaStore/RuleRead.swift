public import DeltaCore
public import DeltaRules
public import Foundation

/// What a read under a rule (a user's read, docs/PROTOCOL.md "Users and rules") needs from a
/// backend, beyond a selection read, inside the same read transaction: the database's head, the
/// rows of the collections a `$rows` rule reads, now and at the token's position, and the
/// version of the rules the database holds.
public protocol RuleSource: SelectionSource {
    /// Offers `visit` each visible body of `collection` now (nil) or as it was at `position`
    /// (from the superseded versions the database keeps; a position before them was rejected as
    /// `expired`), one at a time as they are read: the bytes are valid only during the call.
    /// With a `key`, a backend may leave out rows whose key member is not that string (their
    /// source's filter would not match them).
    func forEachBody(of collection: CollectionName, at position: UInt64?, key: RowsKey?, _ visit: (UnsafeRawBufferPointer) throws -> Void) async throws
    /// The version of the rules the database holds in this snapshot (0: none installed).
    var rulesVersion: UInt64 { get }
    /// The token of the newest commit in this snapshot that changed any of `collections`
    /// (position 0 when none did): where a read that depends on them alone last changed.
    func newestToken(of collections: [CollectionName]) async throws -> Token
}

extension ChangeReader {
    /// The default: the read transaction `openRuleRead` opens, which may be asked for anything.
    public func openRuleChanges(_ collection: CollectionName, since: Since, client: String?) async throws -> (start: RuleReadStart, lastMutation: UInt64?) {
        try await openRuleRead(collection, since: since, client: client)
    }
}

/// How a read under a rule starts.
public enum RuleReadStart: Sendable {
    /// The token cannot be honoured exactly.
    case rejected(TokenRejection)
    /// A source over the open read transaction, whose `token` is the database's head (a user's
    /// rows can change when another collection does), and the feed's mode.
    case source(any RuleSource, FeedMode)
}

/// The rules a database holds (`deltasnap serve --rules`), with their version.
public struct StoredRules: Sendable {
    /// 1 for the first rules installed, then one more for each file that differed.
    public let version: UInt64
    /// The rules.
    public let rules: Rules
    /// When they were installed, and the file as installed (nil when not read from a database).
    public let installedAt: Date?, body: [UInt8]?

    /// Creates one.
    public init(version: UInt64, rules: Rules, installedAt: Date? = nil, body: [UInt8]? = nil) {
        self.version = version
        self.rules = rules
        self.installedAt = installedAt
        self.body = body
    }
}

/// One applied mutation as the log keeps it (`deltasnap log`): who changed which record, when.
public struct LoggedMutation: Sendable, Equatable {
    /// The commit position that applied it.
    public let position: UInt64
    /// When it was applied, in seconds since 1970.
    public let time: Int64
    /// The record's collection and id.
    public let collection: String, id: String
    /// The user whose token pushed it; nil for an app's client key or the owner.
    public let user: String?
    /// The pushing client and its mutation id.
    public let client: String, mutation: UInt64
    /// `put` or `delete`.
    public let operation: String

    /// Creates one.
    public init(position: UInt64, time: Int64, collection: String, id: String, user: String?, client: String, mutation: UInt64, operation: String) {
        (self.position, self.time, self.collection, self.id, self.user) = (position, time, collection, id, user)
        (self.client, self.mutation, self.operation) = (client, mutation, operation)
    }
}

extension RuleSource {
    /// `filter` as a plain filter for `claims`, its `$rows` read in this transaction, now (nil)
    /// or at `position`; a rule that cannot be resolved (a claim missing) matches nothing.
    public func resolve(_ filter: RuleFilter, for claims: Claims, at position: UInt64? = nil) async throws -> Filter {
        var values: [RowsSource: [JSONValue]] = [:]
        for rows in filter.sources where values[rows] == nil {
            var collector = RowsSource.Collector(rows, claims: claims)
            try await forEachBody(of: rows.collection, at: position, key: rows.key(for: claims)) { collector.add($0) }
            values[rows] = collector.values
        }
        return filter.resolve(claims) { values[$0] ?? [] } ?? .or([])
    }
}

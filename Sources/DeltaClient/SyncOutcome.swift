import DeltaCore

public import Foundation

/// Why a collection was reset to the bundled snapshot.
public enum ResetReason: Sendable, Equatable, CustomStringConvertible {
    /// The server sent its reset signal (`409` with `Delta-Reset: <reason>`), for example `unknown-commit`.
    case serverSignal(String)
    /// The body could not be decoded: corrupt gzip, invalid JSON, or truncated.
    case undecodableBody(String)
    /// A record in the body is not a record (no string `"id"`, a non-boolean `"hidden"`, …) or breaks the answer's rules.
    case invalidRecord(String)
    /// The answer does not fit the request: a delta computed from another token, missing or unreadable validators.
    case integrity(String)
    /// The local store failed its integrity check when opened.
    case corruptStore(String)
    /// After an answer, or on a `304`, the records held do not sum to the state digest the server
    /// sent (`Delta-Digest`): a body that is valid but wrong, or a local store changed behind the replica's back.
    case digestMismatch(String)

    /// One line: the kind of failure and its evidence.
    public var description: String {
        switch self {
        case .serverSignal(let reason): return "server reset signal: \(reason)"
        case .undecodableBody(let detail): return "undecodable body: \(detail)"
        case .invalidRecord(let detail): return "invalid record: \(detail)"
        case .integrity(let detail): return "failed integrity check: \(detail)"
        case .corruptStore(let detail): return "corrupt local store: \(detail)"
        case .digestMismatch(let detail): return "state digest mismatch: \(detail)"
        }
    }
}

/// What one sync did to one collection.
public enum CollectionOutcome: Sendable, Equatable {
    /// `304`: nothing changed on the server.
    case notModified
    /// A delta was applied: records inserted or updated, and hidden records removed.
    case applied(upserted: Int, hidden: Int)
    /// A full dataset replaced the collection (the server sent `Delta-Mode: full`).
    case replaced(records: Int)
    /// The answer could not be applied, for the same reason as a reset shortly before: the
    /// collection keeps its data and resets no earlier than `until` (see `ResetReason` and the
    /// back-off schedule), instead of downloading everything again in a loop.
    case resetDeferred(ResetReason, until: Date)
    /// The server's rules give this collection to signed-in users only, and no user's token was
    /// sent (no `credentials`, or they returned nil): the collection keeps its data, the others sync.
    case signInRequired
}

/// The result of syncing one collection.
public struct CollectionSync: Sendable, Equatable {
    /// The collection's name.
    public let collection: String
    /// What the last answer did.
    public let outcome: CollectionOutcome
    /// Set when the collection was reset to the bundled snapshot before that answer was applied.
    public let reset: ResetReason?
    /// The server's `ETag` now stored with the collection's data.
    public let entityTag: String
    /// Which records the sync changed, so that an app refreshes only those rows.
    public let changed: ChangedIDs
    /// The `Delta-Last-Mutation` of the answer applied: which of this client's writes its data holds.
    var confirmed: UInt64?

    /// Creates a result.
    public init(collection: String, outcome: CollectionOutcome, reset: ResetReason?, entityTag: String, changed: ChangedIDs = .ids([])) {
        self.collection = collection
        self.outcome = outcome
        self.reset = reset
        self.entityTag = entityTag
        self.changed = changed
    }

    /// Whether the sync changed the collection's data: an answer applied, or a reset.
    public var changedData: Bool {
        if case .resetDeferred = outcome { return false }
        if outcome == .signInRequired { return false }
        return outcome != .notModified || reset != nil
    }

    /// The same result, holding this client's writes up to `lastMutation`.
    func confirming(_ lastMutation: UInt64?) -> CollectionSync {
        var result = self
        result.confirmed = lastMutation
        return result
    }
}

/// The records a sync changed in one collection: change notifications for an app's UI.
public enum ChangedIDs: Sendable, Equatable {
    /// Exactly these ids were inserted, updated or removed (none: nothing changed).
    case ids(Set<String>)
    /// Any record may have changed: a full download, a reset, more than `maximumListed` ids, or
    /// two ids a `Set<String>` cannot hold apart (equal only canonically, as é precomposed and
    /// decomposed are).
    case all

    /// The most ids listed one by one; past this, a sync reports `.all` (memory stays bounded).
    public static let maximumListed = 10_000

    /// Whether both name the same records: the same ids byte for byte (a `Set<String>` compares
    /// them canonically, as `==` on `String` does, and would call two lists equal that name
    /// different records), or both `.all`.
    public static func == (lhs: ChangedIDs, rhs: ChangedIDs) -> Bool {
        switch (lhs, rhs) {
        case (.all, .all): true
        case (.ids(let left), .ids(let right)): left.count == right.count && Set(left.map { Array($0.utf8) }) == Set(right.map { Array($0.utf8) })
        default: false
        }
    }

    /// Whether the record `id` may have changed.
    public func contains(_ id: String) -> Bool {
        switch self {
        case .ids(let ids): ids.contains(id)
        case .all: true
        }
    }

    /// Adds `id`, switching to `.all` past `maximumListed`, and when a set of strings cannot hold
    /// it beside an id it already has: two ids equal only canonically (é precomposed and
    /// decomposed are two records to the store, one `String` to a `Set`).
    mutating func insert(_ id: String) {
        guard case .ids(var ids) = self else { return }
        let (inserted, member) = ids.insert(id)
        self = ids.count > Self.maximumListed || (!inserted && !member.hasSameBytes(as: id)) ? .all : .ids(ids)
    }
}

/// The result of one `sync()`: what the push did, then one entry per collection, in the snapshot's order.
public struct SyncReport: Sendable, Equatable {
    /// Per collection, what happened.
    public let collections: [CollectionSync]
    /// What pushing the app's writes did (empty when none waited).
    public let pushed: PushSummary
    /// Why the push stopped, when the server refused it for good (`401`, `403`, `409`): the
    /// writes stay queued; the pull still ran. Or, the push having gone on, the blobs the server
    /// refused for good (`413 too-large`, `422 blob-hash`, …; `.refused`, each named in the
    /// evidence): the writes that reference them are turned down (`invalid: blob-missing`), the others went.
    public let pushError: ReplicaError?

    /// Creates a report.
    public init(collections: [CollectionSync], pushed: PushSummary = PushSummary(), pushError: ReplicaError? = nil) {
        self.collections = collections
        self.pushed = pushed
        self.pushError = pushError
    }

    /// Whether any collection's data changed.
    public var changedData: Bool { collections.contains(where: \.changedData) }
}

/// What a replica reports while it syncs, through `Replica.events()`.
public enum SyncEvent: Sendable, Equatable {
    /// A sync began.
    case started
    /// A collection is being reset to the bundled snapshot.
    case reset(collection: String, reason: ResetReason)
    /// A collection would reset again for the same reason as shortly before: it keeps its data
    /// and resets no earlier than `until` (the back-off schedule), instead of looping.
    case resetDeferred(collection: String, reason: ResetReason, until: Date)
    /// A sync ended; the report says what it did.
    case finished(SyncReport)
    /// A sync failed; the replica kept its data.
    case failed(ReplicaError)
    /// A push found a conflict: the app's write was not applied; resolve it with `Replica.resolve`.
    case conflict(Conflict<Record>)
    /// A typed query left record `id` out because it does not decode as the app's model.
    case undecodable(collection: String, id: String, reason: String)
}

/// What opening the replica did to the local store.
public struct OpenReport: Sendable, Equatable {
    /// Collections installed from the bundled snapshot: on first open, or because the bundled
    /// snapshot is newer than the local state (an app update), or after a rebuild.
    public let installed: [String]
    /// Set when the local store was unusable and rebuilt from the bundled snapshot.
    public let rebuilt: ResetReason?

    /// Creates a report.
    public init(installed: [String], rebuilt: ResetReason?) {
        self.installed = installed
        self.rebuilt = rebuilt
    }
}

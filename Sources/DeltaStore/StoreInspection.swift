public import DeltaCore
public import Foundation

/// The store as the operator's console sees it (`deltasnap serve --console`): what each
/// collection holds, its records page by page, a record's every kept version, and the latest
/// mutations pushes applied. Every call is bounded by its `limit` or by one pass over the
/// collections' rows; none takes the write lock. A backend implements it as part of `ChangeStore`.
public protocol StoreInspection: Sendable {
    /// Every collection that holds a record (hidden ones too), by name: its counts, bytes and last change.
    func collectionStatistics() async throws -> [CollectionStatistics]

    /// At most `limit` records of `collection` (hidden ones too) in id order, after `id` when
    /// given, and no more than `maximumBytes` of bodies: the page ends before the record that
    /// would pass it (the first record is always given, whatever its size).
    func recordPage(_ collection: CollectionName, after id: String?, limit: Int, maximumBytes: Int) async throws -> [PagedRecord]

    /// The versions of record `id` the store keeps, newest first, at most `limit` and no more
    /// than `maximumBytes` of bodies (the current one always): the current one, then those it
    /// superseded that compaction has not dropped.
    func history(of id: String, in collection: CollectionName, limit: Int, maximumBytes: Int) async throws -> [RecordVersion]

    /// The newest mutations pushes applied, newest first, that `query` matches: at most
    /// `MutationPage.rowsExamined` rows of the log are examined, and the page says where to go on.
    func recentMutations(_ query: MutationQuery) async throws -> MutationPage

    /// The records changed last, newest first, at most `limit`, at positions before `before`
    /// when given, of one collection when given: every writer's changes (the owner's, apps',
    /// users'), as the records' current versions name them. Each collection is read by its
    /// position index, at most `limit` rows each.
    func recentChanges(in collection: CollectionName?, before: UInt64?, limit: Int) async throws -> [RecentChange]

    /// The compaction horizon: tokens before it are expired.
    func historyHorizon() async throws -> UInt64
}

/// A record as `StoreInspection.recentChanges` lists it: where and when its current version was written.
public struct RecentChange: Sendable, Equatable {
    /// The record's collection and id.
    public let collection: CollectionName, id: String
    /// Whether its current version hides it.
    public let hidden: Bool
    /// The position of the commit that wrote its current version, and when (nil when the commit is not recorded).
    public let position: UInt64, time: Date?

    /// Creates one.
    public init(collection: CollectionName, id: String, hidden: Bool, position: UInt64, time: Date?) {
        (self.collection, self.id, self.hidden, self.position, self.time) = (collection, id, hidden, position, time)
    }
}

/// What one collection holds (`StoreInspection.collectionStatistics`).
public struct CollectionStatistics: Sendable, Equatable {
    /// The collection.
    public let name: CollectionName
    /// Records visible, and hidden (tombstones kept).
    public let visible: Int, hidden: Int
    /// The bytes of the records' bodies, hidden ones included.
    public let bytes: Int64
    /// The position of the collection's last change, and when it was committed (nil when the
    /// commit is not recorded).
    public let lastPosition: UInt64, lastChange: Date?

    /// Creates one.
    public init(name: CollectionName, visible: Int, hidden: Int, bytes: Int64, lastPosition: UInt64, lastChange: Date?) {
        (self.name, self.visible, self.hidden, self.bytes, self.lastPosition, self.lastChange) = (name, visible, hidden, bytes, lastPosition, lastChange)
    }
}

/// A record as a page of `StoreInspection.recordPage` lists it.
public struct PagedRecord: Sendable, Equatable {
    /// The record (`hidden` when it is a tombstone).
    public let record: Record
    /// The position of the commit that wrote this version.
    public let position: UInt64

    /// Creates one.
    public init(record: Record, position: UInt64) {
        self.record = record
        self.position = position
    }
}

/// One kept version of a record (`StoreInspection.history`).
public struct RecordVersion: Sendable, Equatable {
    /// The position of the commit that wrote it, and when that commit was made (nil when it is not recorded).
    public let position: UInt64, time: Date?
    /// Whether this version hid the record.
    public let hidden: Bool
    /// Its canonical JSON.
    public let body: [UInt8]
    /// Whether it is the record's current version.
    public let current: Bool

    /// Creates one.
    public init(position: UInt64, time: Date?, hidden: Bool, body: [UInt8], current: Bool) {
        (self.position, self.time, self.hidden, self.body, self.current) = (position, time, hidden, body, current)
    }
}

/// Which logged mutations `StoreInspection.recentMutations` returns: those before a position
/// (the next page), of one collection, user or client when given, at most `limit`.
public struct MutationQuery: Sendable, Equatable {
    /// Only mutations at positions before this one (nil: up to the newest).
    public var before: UInt64?
    /// Only this collection's.
    public var collection: CollectionName?
    /// Only this user's (a token's `sub`).
    public var user: String?
    /// Only this push client's.
    public var client: String?
    /// At most this many.
    public var limit: Int

    /// Creates a query.
    public init(before: UInt64? = nil, collection: CollectionName? = nil, user: String? = nil, client: String? = nil, limit: Int) {
        (self.before, self.collection, self.user, self.client, self.limit) = (before, collection, user, client, limit)
    }
}

/// A page of `StoreInspection.recentMutations`: the mutations found, and where the next page
/// starts. A page examines at most `rowsExamined` rows of the log (whole commits), so a filter
/// that matches little answers quickly with fewer mutations and a `next`, never a long scan.
public struct MutationPage: Sendable, Equatable {
    /// How many rows of the log one page examines at most (plus the rest of the last commit's).
    public static let rowsExamined = 10_000
    /// The mutations found, newest first; a commit's mutations are never split between pages.
    public let mutations: [LoggedMutation]
    /// The `before` of the next page; nil when the log has nothing older.
    public let next: UInt64?

    /// Creates one.
    public init(mutations: [LoggedMutation], next: UInt64?) {
        self.mutations = mutations
        self.next = next
    }

    /// Collects a page from rows read newest first: stops at the first commit boundary after
    /// `limit` mutations.
    package struct Builder {
        private let limit: Int
        private var mutations: [LoggedMutation] = []
        private var full = false
        /// The lowest position the scan reached (0: the log's start); set by the backend.
        package var floor: UInt64?

        package init(limit: Int) { self.limit = max(1, limit) }

        /// Adds one row; false when the page is full and the row belongs to the next page.
        package mutating func add(_ mutation: LoggedMutation) -> Bool {
            if mutations.count >= limit, let last = mutations.last, last.position != mutation.position {
                full = true
                return false
            }
            mutations.append(mutation)
            return true
        }

        /// The page: going on before its last commit when it is full, before the scan's floor otherwise.
        package var page: MutationPage {
            if full, let last = mutations.last { return MutationPage(mutations: mutations, next: last.position) }
            let floor = floor ?? 0
            return MutationPage(mutations: mutations, next: floor > 0 ? floor : nil)
        }
    }
}

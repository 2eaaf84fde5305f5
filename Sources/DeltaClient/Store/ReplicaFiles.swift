import DeltaCore
import DeltaSQLite
import Foundation

/// The one owner of a replica's two SQLite files, their schemas and every connection to them:
/// the store (the server's records, their tokens, the sync state) and, beside it, the outbox
/// (`<store>-outbox`: the app's writes, in a file of their own so that rebuilding the store or
/// resetting a collection never touches them). Where one transaction must see both, this is
/// where one file is attached to the other's connection, and nowhere else.
///
/// Apps use `Replica`, which opens its files through this type. Tools that work on a replica's
/// files without its configuration (deltasnap's `put`, `delete`, `conflicts`, `resolve`,
/// `status`, `dump`, `query`, `search`) open it themselves: reads through `reader()`, the
/// outbox's writes and conflicts through the methods below.
public final class ReplicaFiles: Sendable {
    /// The store file.
    public let storeURL: URL
    /// The outbox file beside it.
    public var outboxURL: URL { Self.outboxURL(forStore: storeURL) }
    /// The outbox, opened (and created, or completed after a kill) with the files.
    let outbox: Outbox

    /// The outbox file that goes with a store.
    public static func outboxURL(forStore storeURL: URL) -> URL { URL(fileURLWithPath: storeURL.path + "-outbox") }

    /// Opens the files of the replica whose store is `storeURL`, creating the outbox when missing.
    public init(storeURL: URL) throws {
        self.storeURL = storeURL
        outbox = try Outbox(files: storeURL, changes: ChangeHub.shared(for: storeURL))
    }

    /// A read-only view of the records as the app sees them (the store with the outbox over it).
    public func reader() throws -> ReplicaReader { try ReplicaReader(storeURL: storeURL) }

    /// This install's client id: the server counts its mutations under it.
    public var clientID: String { outbox.clientID }

    /// Queues `records` as writes to `collection`, in one transaction (see `Replica.put`).
    public func put(_ records: [Record], in collection: String) throws { try outbox.put(records, in: collection) }

    /// Queues the deletion of record `id` (see `Replica.delete`).
    public func delete(_ id: String, in collection: String) throws { try outbox.delete(id, in: collection) }

    /// Every conflict waiting for a resolution, denied writes included.
    public func conflicts() throws -> [Conflict<Record>] { try outbox.conflicts() }

    /// Settles the conflict of record `id` (see `Replica.resolve`).
    public func resolve(_ id: String, in collection: String, _ resolution: Resolution<Record>) throws { try outbox.resolve(id, in: collection, resolution) }

    /// Where record `id` stands: synced, pending or conflicted.
    public func state(of id: String, in collection: String) throws -> RecordState { try outbox.state(of: id, in: collection) }

    /// Per collection with local writes: how many records wait to be pushed or confirmed, and how many are conflicted.
    public func counts() throws -> [(collection: String, pending: Int, conflicted: Int)] { try outbox.counts() }
}

extension ReplicaFiles {
    /// A connection to the outbox of `storeURL` for writing, with the store attached as `store`
    /// (a push reads the records it writes over), the outbox's schema created or completed, and
    /// the install's client id.
    static func outboxConnection(_ storeURL: URL) throws -> (Connection, clientID: String) {
        let connection = try Connection(path: outboxURL(forStore: storeURL).path, mode: .create)
        // Sorts (numbering a batch) and statement journals stay in memory, not in temporary files.
        // Deleted writes are overwritten with zeros (`secure_delete`): a sign-out leaves none of them in the file.
        try connection.execute(
            "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL; PRAGMA temp_store=MEMORY; PRAGMA secure_delete=ON; PRAGMA journal_size_limit=4194304")
        // Kept when the app closes, as the store's (`ReplicaDatabase`): reopening needs no space.
        try connection.keepWriteAheadLog()
        let clientID = try connection.transaction(.immediate) {
            try connection.execute(outboxSchema)
            // Outboxes made before `overlay.base` existed: their local versions fall back to the collection's ETag.
            if try connection.integer("SELECT count(*) FROM pragma_table_info('overlay') WHERE name = 'base'") == 0 {
                try connection.execute("ALTER TABLE overlay ADD COLUMN base TEXT")
            }
            if let id = try connection.text("SELECT value FROM meta WHERE key = 'client'") { return id }
            let id = UUID().uuidString.lowercased()
            try connection.statement("INSERT INTO meta(key, value) VALUES ('client', ?)").run(.text(id))
            return id
        }
        try connection.statement("ATTACH DATABASE ? AS store").run(.text(storeURL.path))
        // This connection may close the store last: its log is emptied at close too.
        try connection.execute("PRAGMA store.journal_size_limit=4194304")
        try connection.keepWriteAheadLog("store")
        return (connection, clientID)
    }

    /// A read-only connection to the store (it must exist, of this schema version) with the
    /// outbox attached as `outbox`, so that one read sees the records and the app's writes over
    /// them at one moment. An outbox a kill left half made is completed first.
    static func readerConnection(_ storeURL: URL) throws -> Connection {
        let connection = try Connection(path: storeURL.path, mode: .readOnly)
        guard try connection.integer("PRAGMA user_version") == storeSchemaVersion else {
            throw ReplicaError(.store, "not a replica store of this version", evidence: storeURL.path)
        }
        let outbox = outboxURL(forStore: storeURL)
        // Opening the outbox for writing creates it, rolls back a hot journal a kill left, and
        // completes its schema.
        func complete() throws { _ = try outboxConnection(storeURL) }
        if !FileManager.default.fileExists(atPath: outbox.path) { try complete() }
        do { try connection.statement("ATTACH DATABASE ? AS outbox").run(.text(outbox.path)) } catch let error as SQLiteError where error.needsRollback {
            try complete()
            try connection.statement("ATTACH DATABASE ? AS outbox").run(.text(outbox.path))
        }
        if try connection.integer("SELECT count(*) FROM outbox.sqlite_schema WHERE name = 'overlay'") == 0 {
            try connection.execute("DETACH DATABASE outbox")
            try complete()
            try connection.statement("ATTACH DATABASE ? AS outbox").run(.text(outbox.path))
        }
        try connection.keepWriteAheadLog()
        try connection.keepWriteAheadLog("outbox")
        return connection
    }
}

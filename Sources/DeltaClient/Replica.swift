import DeltaCore
import DeltaSQLite
import Foundation

/// A local, offline-first copy of the collections in a bundled snapshot, kept fresh with deltas.
///
/// Open it with the snapshot the app bundles and the server's URL; read from it at any time;
/// write with `put` and `delete`, offline too; call `sync()` when the app starts or comes online
/// (it pushes the app's writes, then pulls). Every change to the local store is one
/// SQLite transaction that also stores the token describing it, so a crash, a cancellation or
/// a bad answer never leaves a half-applied state.
public final class Replica: Sendable {
    /// The configuration the replica was opened with.
    public let configuration: ReplicaConfiguration
    /// What opening did: installs from the bundled snapshot, or a rebuild of a damaged store.
    public let openReport: OpenReport
    /// The collections the replica holds: those of the bundled snapshot, sorted by name.
    public var collections: [String] { manifest.collections.map(\.name.rawValue) }

    /// The bundled snapshot's manifest, read once when the replica opens: resets start from it.
    let manifest: SnapshotManifest

    let store: StoreQueue
    let reader: ReplicaReader
    /// The app's own writes until the server has them (queue, local versions, conflicts); in a
    /// file of its own, so rebuilds and resets never touch it. `put`, `delete`, `conflicts` and
    /// `resolve` on the replica go through it.
    let outbox: Outbox
    let fetcher: Fetcher
    /// The blobs beside the store (`<store>-blobs/`).
    let blobs: ReplicaBlobs
    /// The subscribers to blob transfers (`blobTransfers()`).
    let transfers = TransferFeed()
    /// The blobs this process is downloading now: each resumes its own partial file.
    let downloading = Locked<Set<BlobHash>>([])
    let coordination = Locked(Coordination())
    /// The collections the server answered a push `denied` with rule `collection` for: it takes
    /// no writes to them from this credential, so `put` and `delete` there fail at once. Held in
    /// memory until the credentials change (`signOut`, another user) or the app relaunches.
    let readOnly = Locked<Set<String>>([])
    /// Wakes the live queries of a collection that may have changed: the store file's hub, shared
    /// by every `Replica` on it in this process.
    let changes: ChangeHub
    /// The sync status, as a value and for the observable `status`.
    let statusFeed: StatusFeed

    /// State shared by concurrent callers: the running sync and the event subscribers.
    struct Coordination {
        var running: Task<SyncReport, any Error>?
        /// The running sync's number: callers wait for one sync, not for whichever ends next.
        var generation = 0
        /// Whether every caller of the running sync left and it was cancelled: the next caller
        /// starts another, which begins once the cancelled one has wound down.
        var abandoned = false
        /// The callers waiting, each for one sync (`generation`), each ended on its own by its
        /// cancellation.
        var waiters: [UUID: (generation: Int, continuation: CheckedContinuation<SyncReport, any Error>)] = [:]
        /// How many sign-outs are under way: no sync starts until they end (`signOut`).
        var signingOut = 0
        /// Whether a sync succeeded since the back-off the store holds, but had no space to clear
        /// it (a full disk): that back-off no longer holds.
        var backoffCleared = false
        var subscribers: [UUID: AsyncStream<SyncEvent>.Continuation] = [:]
    }

    /// Opens the replica off the caller's thread: see `init(configuration:)`.
    public static func open(_ configuration: ReplicaConfiguration) async throws -> Replica {
        try await withCheckedThrowingContinuation { continuation in
            DispatchQueue.global().async { continuation.resume(with: Result { try Replica(configuration: configuration) }) }
        }
    }

    /// Opens the replica (blocking: `open` runs it off the caller's thread): creates the store, installs the bundled snapshot on first open
    /// (verifying it as it streams), adopts a newer bundled snapshot after an app update, and
    /// rebuilds a store that fails its integrity check. Never touches the network.
    init(configuration: ReplicaConfiguration) throws {
        guard let scheme = configuration.serverURL.scheme?.lowercased(), ["http", "https"].contains(scheme), configuration.serverURL.host != nil else {
            throw ReplicaError(.configuration, "the server URL must be http or https with a host", evidence: configuration.serverURL.absoluteString)
        }
        self.configuration = configuration
        let manifest = try SnapshotFile.manifest(configuration.snapshotURL)
        self.manifest = manifest
        let path = configuration.storeURL.path
        var rebuilt: ResetReason?
        let database: ReplicaDatabase
        do {
            do {
                database = try ReplicaDatabase(path: path, check: configuration.integrityCheck)
            } catch let damage as StoreDamage {
                rebuilt = .corruptStore(damage.detail)
                for suffix in ["", "-wal", "-shm", "-journal"] { try? FileManager.default.removeItem(atPath: path + suffix) }
                database = try ReplicaDatabase(path: path, check: .none)
            }
        } catch let error as SQLiteError {
            throw ReplicaError("cannot open the local store", storing: error, path: path)
        } catch {
            throw ReplicaError(.store, "cannot open the local store", evidence: "\(path): \(error)")
        }
        database.selections = configuration.selections
        database.blobs = ReplicaBlobs(storeURL: configuration.storeURL)
        database.eagerBlobCollections = Set(configuration.blobDownloads.filter { $0.value == .eager }.keys)
        let install = try manifest.collections.filter { entry in
            let name = entry.name.rawValue
            guard let local = try database.state(of: name) else { return true }
            // Another selection than the one installed: this collection alone starts over.
            if try database.installedSelection(of: name) != ReplicaDatabase.storedForm(configuration.selection(of: name)) { return true }
            return Self.isNewer(snapshot: entry.entityTag, than: local)
        }.map(\.name.rawValue)
        let changes = ChangeHub.shared(for: configuration.storeURL)
        do {
            if !install.isEmpty {
                // Counted, and every live query of this store (another `Replica`'s in this process)
                // woken: its rows are not noted one by one (a first install writes them all).
                try CommitCount.install(on: database.connection, tables: ["main.records"], store: "main")
                try changes.writing(on: database.connection, wakingAll: true) {
                    try database.install(Set(install), from: configuration.snapshotURL) { false }
                }
            }
        } catch let error as SQLiteError {
            throw ReplicaError("cannot install the bundled snapshot", storing: error, path: path)
        }
        do {
            if let indexes = configuration.indexes { try ReplicaIndex.apply(indexes, on: database.connection) }
            if let compound = configuration.compoundIndexes { try ReplicaIndex.apply(compound: compound, on: database.connection) }
            if let searchable = configuration.searchable { try SearchIndex.apply(searchable, on: database.connection) }
        } catch let error as SQLiteError {
            throw ReplicaError("cannot create the configured indexes", storing: error, path: path)
        } catch let error as WireError {
            throw ReplicaError(.configuration, "an index or search setting names no valid collection", evidence: error.description)
        }
        openReport = OpenReport(installed: install, rebuilt: rebuilt)
        self.changes = changes
        do { store = try StoreQueue(database, changes: changes) } catch let error as SQLiteError {
            throw ReplicaError("cannot open the local store", storing: error, path: path)
        }
        outbox = try Outbox(files: configuration.storeURL, changes: changes)
        // A sign-out a kill interrupted is finished before anything is read. The snapshot's path is
        // noted for tools that reopen the store without a configuration (`deltasnap sign-out`).
        do {
            try Self.signOut(database, outbox, configuration.snapshotURL, ReplicaBlobs(storeURL: configuration.storeURL), begin: false)
            // Logs a sign-out could not empty (a read of another process was open then).
            try? Self.emptyLogs(database, outbox)
            try database.setSyncText("snapshot", configuration.snapshotURL.path)
        } catch let error as SQLiteError {
            throw ReplicaError("cannot finish an interrupted sign-out", storing: error, path: path)
        }
        reader = try ReplicaReader(storeURL: configuration.storeURL)
        var state = SyncState()
        do {
            state.lastSyncDate = try database.syncValue("last_success").map(Date.init(timeIntervalSince1970:))
            if let retryAt = try database.syncValue("retry_at"), retryAt > Date().timeIntervalSince1970 {
                state.phase = .backingOff(until: Date(timeIntervalSince1970: retryAt))
            }
            let tally = try outbox.tally()
            (state.pendingWrites, state.conflicts, state.deniedWrites) = (tally.pending, tally.conflicts, tally.denied)
        } catch let error as SQLiteError {
            throw ReplicaError("cannot read the sync state", storing: error, path: path)
        }
        statusFeed = StatusFeed(state)
        blobs = ReplicaBlobs(storeURL: configuration.storeURL)
        blobs.removeStalePartials()
        fetcher = Fetcher(timeout: configuration.requestTimeout, client: outbox.clientID, credentials: configuration.credentials.map(Credentials.init))
    }

    /// Whether a bundled snapshot's token is newer than the local state: same database and a
    /// later position, or another database altogether (the server was rebuilt).
    static func isNewer(snapshot entityTag: String, than local: CollectionState) -> Bool {
        guard entityTag != local.snapshotTag, entityTag != local.entityTag else { return false }
        guard let bundled = try? Token(entityTag: entityTag), let current = try? Token(entityTag: local.entityTag) else { return true }
        return bundled.database != current.database || bundled.position > current.position
    }

    /// A stream of sync events (started, reset, finished, failed) for as long as it is iterated.
    public func events() -> AsyncStream<SyncEvent> {
        let (stream, continuation) = AsyncStream.makeStream(of: SyncEvent.self, bufferingPolicy: .bufferingNewest(256))
        let id = UUID()
        coordination.withLock { $0.subscribers[id] = continuation }
        continuation.onTermination = { [coordination] _ in
            _ = coordination.withLock { $0.subscribers.removeValue(forKey: id) }
        }
        return stream
    }

    /// Sends `event` to every subscriber.
    func emit(_ event: SyncEvent) {
        let subscribers = coordination.withLock { Array($0.subscribers.values) }
        for subscriber in subscribers { subscriber.yield(event) }
    }
}

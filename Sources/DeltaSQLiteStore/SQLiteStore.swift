import DeltaCore
import DeltaSQLite
import DeltaStore
import Foundation

/// The embedded `ChangeStore`: one SQLite file in WAL mode, one writer, a pool of readers.
///
/// Layout: `meta` (identity, schema version, horizon), `commits` (one row per position, with its
/// random tag), `records` (collection, id, position, hidden, canonical body), and the push
/// ledger: `push_clients` (each client's last mutation id), `push_runs` (answers kept for
/// retries, one row per commit), `push_writers` (which client's push wrote a record's current version),
/// `client_principals` (whom each client id belongs to: `owner`, `client` or `user:<sub>`; the
/// older `client_owners` held users' alone, by bare `sub`, and is still read),
/// `superseded` (earlier versions, for selections), `digests` (each collection's state digest),
/// `baked` (the tokens of snapshots baked from it, which compaction keeps valid), `blobs` (the
/// blobs stored whole, their bytes in `blobDirectory`), `blob_refs` (which blobs each record's
/// current version references, kept by the writes and by triggers) and `blob_uploaders` (which
/// users uploaded each blob, so may reference it).
public final class SQLiteStore: ChangeStore {
    /// Settings, with defaults that suit a server.
    public struct Configuration: Sendable {
        /// Most read connections open at once (streaming responses each hold one). Default 16.
        public var maximumReaders = 16
        /// `PRAGMA synchronous`: FULL makes every acknowledged commit durable across power loss. Default FULL.
        public var synchronous = "FULL"
        /// How long to wait for a lock another process holds, in milliseconds. Default 10 s.
        public var busyTimeoutMilliseconds: Int32 = 10_000
        /// Most page cache the one writer connection may use, in KiB (`PRAGMA cache_size`). A
        /// transaction that changes more pages than its cache holds writes them to the WAL early,
        /// and again at commit: with SQLite's 2 MiB default, a push of 5,000 edits spread over a
        /// 100,000-record collection read and wrote a fifth more pages than with 16 MiB, which
        /// holds such a transaction (64 MiB did no better). Default 16 MiB, taken as pages are
        /// touched. The writer also keeps its statement journals in memory (`PRAGMA temp_store =
        /// MEMORY`): once one statement of a transaction (a push dropping its client's previous
        /// answers, say) outgrew SQLite's 64 KiB in-memory journal, every later statement of that
        /// transaction wrote the pages it changed to a temporary file first (46,000 writes for a
        /// push of 10,000 edits).
        public var writerCacheKiB = 16_384
        /// The identity to give a database this open creates (nil: random). An existing database
        /// with another identity is refused. For reproducible demo and test data only: two
        /// different databases must never share an identity.
        public var newDatabaseID: UInt64?
        /// Where blobs' bytes are kept (nil: the database's path with `-blobs` appended, beside
        /// its `-wal` file). Created on the first upload.
        public var blobDirectory: String?

        /// The defaults.
        public init() {}
    }

    /// The schema version this build writes and reads.
    public static let schemaVersion = 1

    /// The database's random identity.
    public let databaseID: UInt64
    /// The database file.
    public let path: String
    /// The directory of blobs' bytes (`SQLiteStore+Blobs`); which blobs are whole is in the database.
    public let blobDirectory: String
    let writer: ConnectionPool<Connection>
    let readers: ConnectionPool<Connection>
    /// One reader per core for early verdicts (`SQLiteStore+EarlyVerdicts`), apart from `readers`
    /// so that a busy read path never leaves an event loop without one.
    let earlyReaders: ConnectionPool<EarlyReader>
    /// The write-ahead log's index, whose header says without a lock whether anything was
    /// committed since an early verdict was decided (`EarlyVerdictMemo`); nil when it cannot be
    /// mapped (then every early verdict asks SQLite). Open until the store is released, not only
    /// closed: an event loop may still read it.
    let walIndex: WALIndex?
    /// This store's number in every thread's `EarlyVerdictMemo`.
    let memoNumber = EarlyVerdictMemo.nextNumber()
    /// Checkpoints the write-ahead log off the writer's path.
    private let checkpointer: Checkpointer
    /// The `$rows` sources whose rows this store reads by an index on their key member
    /// (`SQLiteStore+RowsKeys`), as `collection` + newline + member; set by `installRules`.
    let keyIndexes = Locked(Set<String>())

    /// Opens (creating when missing) the store at `path`.
    public init(path: String, configuration: Configuration = Configuration()) throws {
        self.path = path
        blobDirectory = configuration.blobDirectory ?? path + "-blobs"
        let connection: Connection
        do {
            connection = try Connection(path: path, mode: .create, busyTimeoutMilliseconds: configuration.busyTimeoutMilliseconds)
            databaseID = try SQLiteStore.prepare(connection, synchronous: configuration.synchronous, newID: configuration.newDatabaseID)
        } catch let error as SQLiteError {
            throw StoreError(.unavailable, "store \(path)", "cannot open the database", evidence: error.description)
        }
        let timeout = configuration.busyTimeoutMilliseconds
        // Every writer connection: its cache and statement journals sized, its commits' log lengths reported.
        let cache = "PRAGMA cache_size = -\(max(configuration.writerCacheKiB, 0)); PRAGMA temp_store = MEMORY"
        let walLength = WALLength()
        // Plans never depend on bound values: the `$rows` key indexes are partial (SQLiteStore+RowsKeys).
        let prepareWriter: @Sendable (Connection) throws -> Void = { writer in
            try writer.execute(cache)
            try writer.fixPlans()
            writer.reportWALLength(to: walLength)
        }
        do { try prepareWriter(connection) } catch {
            throw StoreError(.unavailable, "store \(path)", "cannot size the writer's page cache", evidence: "\(error)")
        }
        do { checkpointer = try Checkpointer(path: path) } catch {
            throw StoreError(.unavailable, "store \(path)", "cannot open the checkpoint connection", evidence: "\(error)")
        }
        let checkpointer = self.checkpointer
        let opened = Locked<Connection?>(connection)
        writer = ConnectionPool(maximum: 1) {
            if let first = opened.withLock({ value -> Connection? in
                defer { value = nil }
                return value
            }) {
                return first
            }
            let connection = try Connection(path: path, mode: .readWrite, busyTimeoutMilliseconds: timeout)
            try prepareWriter(connection)
            return connection
        } reset: {
            SQLiteStore.rollBack($0)
            checkpointer.committed(walPages: walLength.current)
        }
        let openReader: @Sendable () throws -> Connection = {
            let reader = try Connection(path: path, mode: .readWrite, busyTimeoutMilliseconds: timeout)
            try reader.execute("PRAGMA query_only = 1")
            try reader.fixPlans()
            return reader
        }
        readers = ConnectionPool(maximum: configuration.maximumReaders, open: openReader) { SQLiteStore.rollBack($0) }
        // Opened from the start, so that every event loop finds one from the first request on.
        let cores = ProcessInfo.processInfo.activeProcessorCount
        earlyReaders = ConnectionPool(maximum: cores, open: { EarlyReader(try openReader()) }) { SQLiteStore.rollBack($0.connection) }
        for _ in 0..<cores {
            guard let reader = try? openReader() else { break }
            earlyReaders.adopt(EarlyReader(reader))
        }
        walIndex = try? WALIndex(path: path, busyTimeoutMilliseconds: timeout)
    }

    /// Sets pragmas, creates or checks the schema, and returns the database identity.
    private static func prepare(_ connection: Connection, synchronous: String, newID: UInt64?) throws -> UInt64 {
        let mode = try connection.text("PRAGMA journal_mode = WAL")
        guard mode == "wal" else {
            throw StoreError(.unavailable, "store \(connection.path)", "cannot switch to WAL mode", evidence: "journal_mode is \(mode ?? "unknown")")
        }
        try connection.execute("PRAGMA synchronous = \(synchronous == "NORMAL" ? "NORMAL" : "FULL")")
        return try connection.transaction(.immediate) {
            try connection.execute(schema)
            try computeDigests(connection)
            if let version = try connection.text("SELECT value FROM meta WHERE key = 'schema_version'") {
                guard Int(version) == schemaVersion else {
                    throw StoreError(
                        .incompatible, "store \(connection.path)", "schema version \(version) is not supported by this build",
                        evidence: "this build reads version \(schemaVersion)")
                }
            } else {
                try connection.statement("INSERT INTO meta(key, value) VALUES ('schema_version', ?)").run(.text(String(schemaVersion)))
            }
            if let stored = try connection.text("SELECT value FROM meta WHERE key = 'database_id'"), let id = UInt64(stored, radix: 16) {
                if let newID, newID != id {
                    throw StoreError(
                        .incompatible, "store \(connection.path)", "exists with another database identity",
                        evidence: "\(String(id, radix: 16)), asked for \(String(newID, radix: 16))")
                }
                return id
            }
            var id: UInt64 = newID ?? 0
            while id == 0 { id = UInt64.random(in: .min ... .max) }
            try connection.statement("INSERT INTO meta(key, value) VALUES ('database_id', ?)").run(.text(String(id, radix: 16)))
            return id
        }
    }

    private static let schema = """
        CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
        CREATE TABLE IF NOT EXISTS commits(
            position INTEGER PRIMARY KEY, tag INTEGER NOT NULL, committed_at INTEGER NOT NULL);
        CREATE TABLE IF NOT EXISTS records(
            collection TEXT NOT NULL, id TEXT NOT NULL, position INTEGER NOT NULL,
            hidden INTEGER NOT NULL, body BLOB NOT NULL,
            PRIMARY KEY (collection, id)) WITHOUT ROWID;
        CREATE INDEX IF NOT EXISTS records_by_position ON records(collection, position);
        CREATE TABLE IF NOT EXISTS push_clients(client TEXT PRIMARY KEY, last_mutation INTEGER NOT NULL) WITHOUT ROWID;
        CREATE TABLE IF NOT EXISTS push_runs(
            client TEXT NOT NULL, first INTEGER NOT NULL, last INTEGER NOT NULL, digests BLOB NOT NULL, results BLOB NOT NULL,
            PRIMARY KEY (client, first)) WITHOUT ROWID;
        CREATE TABLE IF NOT EXISTS push_writers(
            collection TEXT NOT NULL, id TEXT NOT NULL, client TEXT NOT NULL, position INTEGER NOT NULL,
            PRIMARY KEY (collection, id)) WITHOUT ROWID;
        CREATE TABLE IF NOT EXISTS superseded(
            collection TEXT NOT NULL, id TEXT NOT NULL, position INTEGER NOT NULL, hidden INTEGER NOT NULL, body BLOB NOT NULL,
            PRIMARY KEY (collection, id, position)) WITHOUT ROWID;
        CREATE TRIGGER IF NOT EXISTS records_superseded BEFORE UPDATE ON records WHEN old.position <> new.position BEGIN
            INSERT OR REPLACE INTO superseded VALUES (old.collection, old.id, old.position, old.hidden, old.body);
        END;
        INSERT OR IGNORE INTO meta(key, value) SELECT 'history_since', coalesce(max(position), 0) FROM commits;
        CREATE TABLE IF NOT EXISTS client_owners(client TEXT PRIMARY KEY, user TEXT NOT NULL) WITHOUT ROWID;
        CREATE TABLE IF NOT EXISTS client_principals(client TEXT PRIMARY KEY, principal TEXT NOT NULL) WITHOUT ROWID;
        CREATE TABLE IF NOT EXISTS mutation_log(
            position INTEGER NOT NULL, collection TEXT NOT NULL, id TEXT NOT NULL, user TEXT, client TEXT NOT NULL,
            mutation INTEGER NOT NULL, operation TEXT NOT NULL, logged_at INTEGER NOT NULL);
        CREATE INDEX IF NOT EXISTS mutation_log_by_record ON mutation_log(collection, id, position);
        CREATE INDEX IF NOT EXISTS mutation_log_by_position ON mutation_log(position);
        CREATE TABLE IF NOT EXISTS rules(version INTEGER PRIMARY KEY, digest TEXT NOT NULL, body BLOB NOT NULL, installed_at INTEGER NOT NULL);
        CREATE TABLE IF NOT EXISTS digests(collection TEXT PRIMARY KEY, digest BLOB NOT NULL, records INTEGER NOT NULL) WITHOUT ROWID;
        CREATE TABLE IF NOT EXISTS baked(
            collection TEXT NOT NULL, position INTEGER NOT NULL, etag TEXT NOT NULL, baked_at INTEGER NOT NULL,
            PRIMARY KEY (collection, position, etag)) WITHOUT ROWID;
        CREATE TABLE IF NOT EXISTS blobs(hash TEXT PRIMARY KEY, size INTEGER NOT NULL, type TEXT NOT NULL, stored_at INTEGER NOT NULL) WITHOUT ROWID;
        CREATE TABLE IF NOT EXISTS blob_refs(hash TEXT NOT NULL, collection TEXT NOT NULL, id TEXT NOT NULL, PRIMARY KEY (hash, collection, id)) WITHOUT ROWID;
        CREATE INDEX IF NOT EXISTS blob_refs_by_record ON blob_refs(collection, id);
        CREATE TABLE IF NOT EXISTS blob_uploaders(hash TEXT NOT NULL, user TEXT NOT NULL, PRIMARY KEY (hash, user)) WITHOUT ROWID;
        CREATE TRIGGER IF NOT EXISTS records_blob_refs_update AFTER UPDATE OF body ON records WHEN instr(old.body, '"$blob"') > 0 BEGIN
            DELETE FROM blob_refs WHERE collection = old.collection AND id = old.id;
        END;
        CREATE TRIGGER IF NOT EXISTS records_blob_refs_delete AFTER DELETE ON records WHEN instr(old.body, '"$blob"') > 0 BEGIN
            DELETE FROM blob_refs WHERE collection = old.collection AND id = old.id;
        END;
        """

    /// The newest committed position (0 when the database is empty).
    public func headPosition() async throws -> UInt64 {
        let connection = try await readers.checkout()
        defer { readers.checkin(connection) }
        return try sqlite { UInt64(clamping: try connection.integer("SELECT coalesce(max(position), 0) FROM commits") ?? 0) }
    }

    /// A connection goes back to its pool outside any transaction.
    private static func rollBack(_ connection: Connection) {
        if connection.inTransaction { try? connection.execute("ROLLBACK") }
    }

    /// Closes every connection but `walIndex`'s, which the store closes when it is released (an
    /// event loop may still read the index; its answers stay right, as the index stays live).
    public func close() async throws {
        checkpointer.close()
        writer.close()
        readers.close()
        earlyReaders.close()
    }

    /// Runs `body`, turning SQLite failures into `StoreError`.
    @discardableResult
    func sqlite<T>(_ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch let error as SQLiteError {
            throw StoreError(error.isCorruption ? .corrupt : .unavailable, "store \(path)", "database call failed", evidence: error.description)
        }
    }
}

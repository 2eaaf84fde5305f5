import DeltaCore
import DeltaSQLite
import Foundation

/// The validators the server sent with a collection's data, stored beside it.
struct CollectionState: Sendable, Equatable {
    /// The `ETag`, echoed in `If-None-Match`.
    var entityTag: String
    /// The `Last-Modified` value, echoed in `If-Modified-Since`.
    var lastModified: String
    /// The `ETag` of the bundled snapshot this state was installed from (or reset to).
    var snapshotTag: String
}

/// The local store is damaged: rebuild it from the snapshot.
struct StoreDamage: Error {
    let detail: String
}

/// The replica's SQLite file: visible records by (collection, id), each collection's validators,
/// and the back-off state. One connection, used by one caller at a time.
final class ReplicaDatabase {
    /// Bumped when the schema changes; a store with another version is rebuilt from the snapshot.
    static var schemaVersion: Int64 { ReplicaFiles.storeSchemaVersion }
    /// The schema (`ReplicaFiles.storeSchema`).
    static var schema: String { ReplicaFiles.storeSchema }

    let connection: Connection
    /// The store file's path.
    let path: String
    /// The selection configured per collection (`ReplicaConfiguration.selections`).
    var selections: [String: Selection] = [:]
    /// The replica's blobs, where installing a snapshot copies the blobs it carries (none when unset).
    var blobs: ReplicaBlobs?
    /// The collections whose blobs download with the sync (`BlobDownloads.eager`).
    var eagerBlobCollections: Set<String> = []

    /// Opens (or creates) the store at `path`; throws `StoreDamage` when it must be rebuilt.
    init(path: String, check: ReplicaConfiguration.IntegrityCheck) throws {
        self.path = path
        do {
            connection = try Connection(path: path, mode: .create)
            // Deleted rows are overwritten with zeros, so that a signed-out user's rows leave the
            // file's free pages too (`Replica.signOut`).
            try connection.execute("PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL; PRAGMA secure_delete=ON; PRAGMA journal_size_limit=4194304")
            // The log and its index stay when the app closes: reopening on a full disk creates
            // nothing. The log is emptied at close and kept under 4 MiB (`journal_size_limit`),
            // so what it holds is never read in place of the file's own pages after a clean close.
            try connection.keepWriteAheadLog()
            let version = try connection.integer("PRAGMA user_version") ?? 0
            let tables = try connection.integer("SELECT count(*) FROM sqlite_schema") ?? 0
            if version == 0 && tables == 0 {
                try connection.transaction(.immediate) {
                    try connection.execute(Self.schema)
                    try connection.execute("PRAGMA user_version=\(Self.schemaVersion)")
                }
            } else if version != Self.schemaVersion {
                throw StoreDamage(detail: "schema version \(version), this build uses \(Self.schemaVersion)")
            }
            switch check {
            case .none: break
            case .quick, .full:
                let problems = try check == .full ? connection.integrityProblems() : quickCheck()
                if !problems.isEmpty { throw StoreDamage(detail: problems.prefix(3).joined(separator: "; ")) }
                if check == .full, let problem = try digestProblem() { throw StoreDamage(detail: problem) }
            }
        } catch let error as SQLiteError where Self.isDamage(error) {
            throw StoreDamage(detail: error.description)
        }
    }

    /// Whether an SQLite error means a damaged file rather than, say, a permission problem.
    static func isDamage(_ error: SQLiteError) -> Bool {
        let primary = error.code & 0xFF
        return primary == 11 || primary == 26  // SQLITE_CORRUPT, SQLITE_NOTADB
    }

    private func quickCheck() throws -> [String] {
        let statement = try connection.statement("PRAGMA quick_check")
        defer { statement.reset() }
        var problems: [String] = []
        while try statement.step() {
            let line = statement.string(0)
            if line != "ok" { problems.append(line) }
        }
        return problems
    }

    /// The stored validators of `collection`, or nil when it was never installed.
    func state(of collection: String) throws -> CollectionState? {
        let statement = try connection.statement("SELECT etag, last_modified, snapshot_etag FROM collections WHERE name = ?")
        defer { statement.reset() }
        try statement.bind([.text(collection)])
        guard try statement.step() else { return nil }
        return CollectionState(entityTag: statement.string(0), lastModified: statement.string(1), snapshotTag: statement.string(2))
    }

    /// Stores the validators of `collection` (inside the transaction that changed its data).
    func setState(_ state: CollectionState, of collection: String) throws {
        try connection.statement("INSERT OR REPLACE INTO collections(name, etag, last_modified, snapshot_etag) VALUES (?, ?, ?, ?)")
            .run(.text(collection), .text(state.entityTag), .text(state.lastModified), .text(state.snapshotTag))
    }

    /// Removes every record of `collection`.
    func clear(_ collection: String) throws {
        try connection.statement("DELETE FROM records WHERE collection = ?").run(.text(collection))
    }

    /// Inserts a record that must not exist yet (restores and full datasets hold each id once).
    func insert(_ record: Record, into collection: String) throws {
        let statement = try connection.statement("INSERT INTO records(collection, id, body) VALUES (?, ?, ?)")
        try bind(statement, collection, record)
        do {
            try statement.step()
        } catch let error as SQLiteError where error.isConstraint {
            throw ApplyFailure(.invalidRecord("record \(String(reflecting: record.id)) appears twice"))
        }
    }

    /// Inserts or updates a record. An upsert, not `INSERT OR REPLACE`: a replaced row is deleted
    /// without firing delete triggers, which left the search index holding the old text.
    func upsert(_ record: Record, into collection: String) throws {
        let statement = try connection.statement(
            "INSERT INTO records(collection, id, body) VALUES (?, ?, ?) ON CONFLICT(collection, id) DO UPDATE SET body = excluded.body")
        try bind(statement, collection, record)
        try statement.step()
    }

    private func bind(_ statement: Statement, _ collection: String, _ record: Record) throws {
        statement.reset()
        try statement.bind(.text(collection), at: 1)
        try statement.bind(.text(record.id), at: 2)
        try statement.bindText(bytes: record.body, at: 3)
    }

    /// A value of the back-off state.
    func syncValue(_ key: String) throws -> Double? {
        let statement = try connection.statement("SELECT value FROM sync_state WHERE key = ?")
        defer { statement.reset() }
        try statement.bind([.text(key)])
        guard try statement.step(), !statement.isNull(0) else { return nil }
        return Double(statement.string(0))
    }

    /// Sets (or, with nil, removes) a value of the back-off state.
    func setSyncValue(_ key: String, _ value: Double?) throws {
        if let value {
            try connection.statement("INSERT OR REPLACE INTO sync_state(key, value) VALUES (?, ?)").run(.text(key), .text(String(value)))
        } else {
            try connection.statement("DELETE FROM sync_state WHERE key = ?").run(.text(key))
        }
    }
}

/// An answer or a snapshot that cannot be applied; the transaction is rolled back and the collection reset.
struct ApplyFailure: Error {
    let reason: ResetReason
    init(_ reason: ResetReason) { self.reason = reason }
}

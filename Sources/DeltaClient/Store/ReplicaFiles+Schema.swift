extension ReplicaFiles {
    /// The store's schema version; a store with another version is rebuilt from the snapshot.
    static let storeSchemaVersion: Int64 = 1

    /// The store: each collection's validators, its visible records by (collection, id), and
    /// the sync state (back-off, the user, the snapshot's path). Also the benchmark's `sqlite3` baseline's.
    static let storeSchema = """
        CREATE TABLE IF NOT EXISTS collections(
            name TEXT PRIMARY KEY, etag TEXT NOT NULL, last_modified TEXT NOT NULL, snapshot_etag TEXT NOT NULL
        ) WITHOUT ROWID;
        CREATE TABLE IF NOT EXISTS records(
            collection TEXT NOT NULL, id TEXT NOT NULL, body TEXT NOT NULL, PRIMARY KEY (collection, id)
        ) WITHOUT ROWID;
        CREATE TABLE IF NOT EXISTS sync_state(key TEXT PRIMARY KEY, value) WITHOUT ROWID;
        """

    /// The outbox: the queue of mutations to push, the local version of every record they touch
    /// (what reads show), acknowledgements waiting for a pull to confirm them, and conflicts.
    static let outboxSchema = """
        CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
        CREATE TABLE IF NOT EXISTS mutations(
            seq INTEGER PRIMARY KEY, collection TEXT NOT NULL, record_id TEXT NOT NULL, op TEXT NOT NULL,
            body TEXT, base TEXT, is_create INTEGER NOT NULL, mutation INTEGER UNIQUE);
        CREATE INDEX IF NOT EXISTS mutations_by_record ON mutations(collection, record_id, seq);
        CREATE TABLE IF NOT EXISTS overlay(
            collection TEXT NOT NULL, id TEXT NOT NULL, hidden INTEGER NOT NULL, body TEXT NOT NULL, base TEXT,
            PRIMARY KEY (collection, id)) WITHOUT ROWID;
        CREATE TABLE IF NOT EXISTS acknowledged(id INTEGER PRIMARY KEY, collection TEXT NOT NULL, record_id TEXT NOT NULL);
        CREATE INDEX IF NOT EXISTS acknowledged_by_record ON acknowledged(collection, record_id);
        CREATE TABLE IF NOT EXISTS conflicts(
            collection TEXT NOT NULL, id TEXT NOT NULL, mutation INTEGER NOT NULL, reason TEXT NOT NULL,
            server TEXT, server_base TEXT, PRIMARY KEY (collection, id)) WITHOUT ROWID;
        """
}

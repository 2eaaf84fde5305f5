import DeltaSQLite
import Foundation

/// Each file of a replica counts the commits that wrote rows a live query reads: the store its
/// `records` (in `sync_state`), the outbox its local versions and conflicts (in `meta`), under
/// the key `commits`, whichever process or connection wrote them. A live query that patches its
/// result (`ResultPatch`) reads both counts in the same read as its rows; if they are not those
/// its hub has delivered every change up to (`ChangeHub.quietMark`), a commit no one told it of
/// (another process's) came between, and it reads its whole result instead.
///
/// Each file counts in itself, in the transaction that wrote its rows: a transaction that writes
/// only the outbox does not write the store file (on a full disk, a commit of two files can fail
/// after the first one is on disk), and a read sees each file's count with that file's rows.
///
/// The writer connections' temporary triggers count (`install`), so no write path has a call to
/// forget: the first row a transaction writes in a file moves that file's count and notes the
/// number it made (`own`), once per transaction (`commit_counted`, reset right after each `BEGIN`
/// of `Connection.transaction` by the connection's `afterBegin`). Writes outside
/// `Connection.transaction` are counted once until the writer's next `own`: every writer of rows
/// that live queries read uses `transaction`.
///
/// A count starts at a random number in each file, so a file rebuilt or replaced (a sign-out, a
/// schema change) does not count again through numbers a hub knew from the file before.
enum CommitCount {
    /// The key of the count in `sync_state` (the store) and `meta` (the outbox).
    static let key = "commits"

    /// Both files' counts, as one read saw them.
    struct Counts: Sendable, Equatable {
        /// The store's.
        var store: Int64
        /// The outbox's.
        var outbox: Int64
    }

    /// This connection's commits' numbers since the last `own`, by file.
    struct Own: Sendable, Equatable {
        /// The store's.
        var store: [Int64] = []
        /// The outbox's.
        var outbox: [Int64] = []
    }

    /// The file a counting trigger counts in: its number in `own_commits`, its table, and how
    /// this connection names the file (its schema).
    private struct File {
        let number: Int
        let table: String
        let schema: String
    }

    /// Creates the counting triggers on `tables` (qualified) of this connection, and each file's
    /// count when it has none; sets the connection's `afterBegin`. `store` is the schema that
    /// is the store file on this connection; the other tables are the outbox's.
    static func install(on connection: Connection, tables: [String], store: String) throws {
        var sql = """
            CREATE TEMP TABLE IF NOT EXISTS commit_counted(file INTEGER PRIMARY KEY, counted INTEGER NOT NULL);
            INSERT OR IGNORE INTO commit_counted VALUES (0, 0), (1, 0);
            CREATE TEMP TABLE IF NOT EXISTS own_commits(file INTEGER NOT NULL, count INTEGER NOT NULL, PRIMARY KEY (file, count)) WITHOUT ROWID;
            """
        var files: [String: File] = [:]
        for table in tables {
            let parts = table.split(separator: ".", maxSplits: 1).map(String.init)
            guard parts.count == 2 else { throw SQLiteError(code: 1, message: "CommitCount: a table must be qualified by its schema: \(table)") }
            let file = parts[0] == store ? File(number: 0, table: "sync_state", schema: store) : File(number: 1, table: "meta", schema: parts[0])
            if files[file.schema] == nil {
                try resolves(file, on: connection)
                // Each file's own writer gives it its count (the outbox's writer has the store
                // attached, and need not wait for the store's lock for it).
                if file.schema == "main" { try start(file, on: connection) }
                files[file.schema] = file
            }
            // A trigger's writes name tables unqualified (SQLite's rule); `resolves` checked
            // they are the file's. No conflict clause: the writing statement's own overrides it.
            let name = table.replacingOccurrences(of: ".", with: "_")
            for event in ["INSERT", "UPDATE", "DELETE"] {
                sql += """
                    CREATE TEMP TRIGGER IF NOT EXISTS counted_\(name)_\(event.lowercased()) AFTER \(event) ON \(table)
                    WHEN (SELECT counted FROM temp.commit_counted WHERE file = \(file.number)) = 0
                    BEGIN
                        UPDATE commit_counted SET counted = 1 WHERE file = \(file.number);
                        UPDATE \(file.table) SET value = value + 1 WHERE key = '\(key)';
                        INSERT INTO \(file.table)(key, value) SELECT '\(key)', \(randomStart)
                            WHERE NOT EXISTS (SELECT 1 FROM \(file.schema).\(file.table) WHERE key = '\(key)');
                        INSERT INTO own_commits SELECT \(file.number), value FROM \(file.schema).\(file.table) WHERE key = '\(key)';
                    END;
                    """
            }
        }
        try connection.execute(sql)
        connection.afterBegin = "UPDATE temp.commit_counted SET counted = 0"
    }

    /// A random start, below 2^42: far from any other file's numbers, far from overflowing.
    private static let randomStart = "(random() >> 21) & 0x3ffffffffff"

    /// Throws unless the unqualified name of `file`'s table is that file's on `connection`
    /// (SQLite looks in temp, then main, then the attached databases).
    private static func resolves(_ file: File, on connection: Connection) throws {
        guard file.schema != "main" else { return }
        if try connection.integer("SELECT count(*) FROM main.sqlite_master WHERE name = ?", .text(file.table)) != 0 {
            throw SQLiteError(code: 1, message: "CommitCount: main.\(file.table) would count instead of \(file.schema).\(file.table)")
        }
    }

    /// Gives `file` its count if it has none, so that the first look of a hub reads one (a count
    /// made by the first commit, after a look found none, would leave a gap until the next look).
    /// It does not wait for another writer's lock (opening a store never waits on another
    /// process's sync for it): a file that cannot be written now (a lock held, a full disk) gets
    /// its count at its first counted commit.
    private static func start(_ file: File, on connection: Connection) throws {
        let table = "\(file.schema).\(file.table)"
        guard try connection.integer("SELECT count(*) FROM \(table) WHERE key = ?", .text(key)) == 0 else { return }
        let insert = "INSERT INTO \(table)(key, value) SELECT '\(key)', \(randomStart) WHERE NOT EXISTS (SELECT 1 FROM \(table) WHERE key = '\(key)')"
        let patience = connection.busyTimeoutMilliseconds
        connection.busyTimeoutMilliseconds = 0
        defer { connection.busyTimeoutMilliseconds = patience }
        try? connection.execute(insert)
    }

    /// The numbers this connection's commits made since the last call, by file, in order,
    /// forgotten as they are returned; also ends the counting of writes made outside
    /// `Connection.transaction` (the next one counts again). Call it outside any transaction.
    static func own(_ connection: Connection) throws -> Own {
        let statement = try connection.statement("SELECT file, count FROM temp.own_commits ORDER BY file, count")
        var own = Own()
        while try statement.step() {
            if statement.int64(0) == 0 { own.store.append(statement.int64(1)) } else { own.outbox.append(statement.int64(1)) }
        }
        statement.reset()
        // Cached statements: `execute` would prepare them again after every write.
        if !own.store.isEmpty || !own.outbox.isEmpty { try connection.statement("DELETE FROM temp.own_commits").run() }
        try connection.statement("UPDATE temp.commit_counted SET counted = 0").run()
        return own
    }

    /// Both files' counts as `connection` (a reader: the store as `main`, the outbox attached as
    /// `outbox`) sees them now, in one statement (in its transaction, when one is open); 0 for a
    /// file without one yet.
    static func read(_ connection: Connection) throws -> Counts {
        let statement = try connection.statement(
            "SELECT (SELECT value FROM main.sync_state WHERE key = ?1), (SELECT value FROM outbox.meta WHERE key = ?1)")
        defer { statement.reset() }
        try statement.bind([.text(key)])
        _ = try statement.step()
        return Counts(store: statement.int64(0), outbox: statement.int64(1))
    }
}

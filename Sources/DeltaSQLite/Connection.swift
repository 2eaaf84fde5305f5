import CSQLite

/// One SQLite connection: not thread-safe, so one caller at a time (the owner serialises access).
///
/// Statements are prepared once and cached by SQL text.
public final class Connection: @unchecked Sendable {
    /// The SQLite library's version number (3045000 for 3.45.0), as `sqlite3_libversion_number` gives it.
    public static var libraryVersion: Int32 { sqlite3_libversion_number() }

    /// Whether this SQLite's JSON functions end a string at an escaped NUL (`\u0000`): before
    /// 3.45, `json_extract` of `"a\u0000b"` is `a`. An index on such an expression then holds a
    /// prefix of the value, which the replica's queries allow for (`ReplicaIndex`).
    public static var jsonTruncatesAtNUL: Bool { libraryVersion < 3_045_000 }

    /// How a connection opens its file.
    public enum Mode: Sendable {
        /// Read-only; the file must exist.
        case readOnly
        /// Read-write; the file must exist.
        case readWrite
        /// Read-write; the file is created when missing.
        case create
    }

    let handle: OpaquePointer
    private var cache: [String: Statement] = [:]
    /// The path this connection opened.
    public let path: String
    /// Where the WAL hook reports, kept alive with the connection (`reportWALLength(to:)`).
    var walLength: WALLength?
    /// How long a statement waits for locks held by other connections, in milliseconds (0: it
    /// fails at once with `SQLITE_BUSY`).
    public var busyTimeoutMilliseconds: Int32 {
        didSet { sqlite3_busy_timeout(handle, busyTimeoutMilliseconds) }
    }
    /// One statement `transaction` runs in each transaction right after its `BEGIN` (nil: none),
    /// prepared once: a connection's own per-transaction bookkeeping, such as resetting a
    /// temporary table that its triggers read.
    public var afterBegin: String?

    /// Opens `path` in `mode`, waiting up to `busyTimeoutMilliseconds` for locks held by others.
    public init(path: String, mode: Mode = .create, busyTimeoutMilliseconds: Int32 = 10_000) throws {
        var flags = SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_EXRESCODE
        switch mode {
        case .readOnly: flags |= SQLITE_OPEN_READONLY
        case .readWrite: flags |= SQLITE_OPEN_READWRITE
        case .create: flags |= SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE
        }
        var db: OpaquePointer?
        let status = sqlite3_open_v2(path, &db, flags, nil)
        guard status == SQLITE_OK, let db else {
            let message = db.map { String(cString: sqlite3_errmsg($0)) } ?? "cannot open"
            if let db { sqlite3_close_v2(db) }
            throw SQLiteError(code: status, message: "\(message): \(path)")
        }
        handle = db
        self.path = path
        self.busyTimeoutMilliseconds = busyTimeoutMilliseconds
        sqlite3_busy_timeout(db, busyTimeoutMilliseconds)
        sqlite3_extended_result_codes(db, 1)
    }

    deinit {
        cache.removeAll()
        sqlite3_close_v2(handle)
    }

    /// Keeps the write-ahead log and its shared-memory index on disk when the last connection
    /// closes (`SQLITE_FCNTL_PERSIST_WAL`) for `schema` (`main`, or an attached database's name):
    /// the next opener then creates no file, so a store can be opened and read on a full disk.
    public func keepWriteAheadLog(_ schema: String = "main") throws {
        var on: Int32 = 1
        let status = sqlite3_file_control(handle, schema, SQLITE_FCNTL_PERSIST_WAL, &on)
        guard status == SQLITE_OK else { throw SQLiteError(code: status, message: "cannot keep the write-ahead log: \(path) (\(schema))") }
    }

    /// Makes the query planner choose plans without looking at bound values (SQLite's query
    /// planner stability guarantee), so a cached statement is never prepared again because a
    /// new binding might have allowed another plan. A store with partial indexes needs it: each
    /// statement whose parameters might imply an index's `WHERE` is otherwise re-prepared at
    /// every new binding (measured: 5.6 against 34 µs for a read of a one-row collection).
    public func fixPlans() throws {
        let status = deltasnap_sqlite_fix_plans(handle)
        guard status == SQLITE_OK else { throw SQLiteError(code: status, message: "cannot fix query plans: \(path)") }
    }

    /// `PRAGMA data_version`: changes whenever another connection (of this process or another)
    /// has committed since this connection last asked.
    public func dataVersion() throws -> Int64 {
        let query = try statement("PRAGMA data_version")
        defer { query.reset() }
        _ = try query.step()
        return query.int64(0)
    }

    /// Runs one or more statements that return no rows.
    public func execute(_ sql: String) throws {
        var error: UnsafeMutablePointer<CChar>?
        let status = sqlite3_exec(handle, sql, nil, nil, &error)
        if status != SQLITE_OK {
            let message = error.map { String(cString: $0) } ?? String(cString: sqlite3_errmsg(handle))
            sqlite3_free(error)
            throw SQLiteError(code: status, message: message, sql: sql)
        }
    }

    /// The cached prepared statement for `sql`, reset and with its bindings cleared
    /// (or, with `keepingPosition`, exactly as the last caller left it, to continue stepping).
    public func statement(_ sql: String, keepingPosition: Bool = false) throws -> Statement {
        if let cached = cache[sql] {
            if !keepingPosition { cached.reset() }
            return cached
        }
        let statement = try Statement(connection: self, sql: sql)
        cache[sql] = statement
        return statement
    }

    /// Runs `afterBegin`, then `body`, inside `BEGIN <kind>` … `COMMIT`, rolling back when either throws.
    public func transaction<T>(_ kind: TransactionKind = .deferred, _ body: () throws -> T) throws -> T {
        try execute("BEGIN \(kind.rawValue)")
        do {
            if let afterBegin { try statement(afterBegin).run() }
            let result = try body()
            resetStatements()
            try execute("COMMIT")
            return result
        } catch {
            try? execute("ROLLBACK")
            throw error
        }
    }

    /// Resets every cached statement, ending any read cursors they hold.
    public func resetStatements() {
        for statement in cache.values { statement.reset() }
    }

    /// Rows changed by the last INSERT, UPDATE or DELETE.
    public var changes: Int { Int(sqlite3_changes(handle)) }

    /// Whether a transaction is open on this connection.
    public var inTransaction: Bool { sqlite3_get_autocommit(handle) == 0 }

    /// The error for a failed call, with SQLite's message.
    func error(_ status: Int32, sql: String?) -> SQLiteError {
        SQLiteError(code: status, message: String(cString: sqlite3_errmsg(handle)), sql: sql)
    }

    /// The first column of the first row of `sql` as an integer, or nil when there is no row or it is NULL.
    public func integer(_ sql: String, _ bindings: SQLValue...) throws -> Int64? {
        let statement = try statement(sql)
        defer { statement.reset() }
        try statement.bind(bindings)
        guard try statement.step(), !statement.isNull(0) else { return nil }
        return statement.int64(0)
    }

    /// The first column of the first row of `sql` as text, or nil when there is no row or it is NULL.
    public func text(_ sql: String, _ bindings: SQLValue...) throws -> String? {
        let statement = try statement(sql)
        defer { statement.reset() }
        try statement.bind(bindings)
        guard try statement.step(), !statement.isNull(0) else { return nil }
        return statement.string(0)
    }

    /// Runs `PRAGMA integrity_check` and returns its findings (empty when the database is sound).
    public func integrityProblems() throws -> [String] {
        let statement = try Statement(connection: self, sql: "PRAGMA integrity_check")
        var problems: [String] = []
        while try statement.step() {
            let line = statement.string(0)
            if line != "ok" { problems.append(line) }
        }
        return problems
    }
}

/// How `BEGIN` takes its locks.
public enum TransactionKind: String, Sendable {
    /// Takes locks when first needed; a read transaction until it writes.
    case deferred = "DEFERRED"
    /// Takes the write lock at once.
    case immediate = "IMMEDIATE"
}

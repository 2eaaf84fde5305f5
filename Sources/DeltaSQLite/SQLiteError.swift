import CSQLite

/// The one public error type of `DeltaSQLite`: a SQLite call failed.
///
/// Messages read `SQLite: why (code N, statement)`, like GRDB's `DatabaseError`.
public struct SQLiteError: Error, Sendable, CustomStringConvertible {
    /// The SQLite result code (primary or extended).
    public let code: Int32
    /// SQLite's own message for the failure.
    public let message: String
    /// The SQL being run, when there was one.
    public let sql: String?

    /// Creates an error.
    public init(code: Int32, message: String, sql: String? = nil) {
        self.code = code
        self.message = message
        self.sql = sql
    }

    /// `SQLite: message (code N: SQL)`.
    public var description: String {
        var evidence = "code \(code)"
        if let sql { evidence += ": \(sql.prefix(200))" }
        return "SQLite: \(message) (\(evidence))"
    }

    /// True for SQLITE_CORRUPT and SQLITE_NOTADB: the file is damaged or not a database.
    public var isCorruption: Bool {
        let primary = code & 0xFF
        return primary == SQLITE_CORRUPT || primary == SQLITE_NOTADB
    }

    /// True for SQLITE_READONLY_ROLLBACK: a read-only connection met a hot journal that a
    /// connection allowed to write must roll back first.
    public var needsRollback: Bool { code == SQLITE_READONLY | (3 << 8) }

    /// True for SQLITE_CONSTRAINT failures.
    public var isConstraint: Bool { code & 0xFF == SQLITE_CONSTRAINT }
}

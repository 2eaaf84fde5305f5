import CSQLite
import Foundation

/// A value bound to a statement parameter.
public enum SQLValue: Sendable {
    /// SQL NULL.
    case null
    /// A 64-bit integer.
    case integer(Int64)
    /// UTF-8 text.
    case text(String)
    /// Raw bytes.
    case blob([UInt8])
}

/// The storage class of a column's value in a result row (SQLite's `sqlite3_column_type`).
public enum ColumnType: Sendable {
    /// SQL NULL.
    case null
    /// A 64-bit integer.
    case integer
    /// A double.
    case real
    /// Text.
    case text
    /// Bytes.
    case blob
}

/// A prepared statement, owned by its connection's cache.
public final class Statement {
    private let pointer: OpaquePointer
    private unowned let connection: Connection
    /// The statement's SQL.
    public let sql: String

    private static let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

    init(connection: Connection, sql: String) throws {
        var pointer: OpaquePointer?
        let status = sqlite3_prepare_v3(connection.handle, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &pointer, nil)
        guard status == SQLITE_OK, let pointer else { throw connection.error(status, sql: sql) }
        self.pointer = pointer
        self.connection = connection
        self.sql = sql
    }

    deinit { sqlite3_finalize(pointer) }

    /// Resets the statement to run again and clears its bindings.
    public func reset() {
        sqlite3_reset(pointer)
        sqlite3_clear_bindings(pointer)
    }

    /// Binds `values` to parameters 1, 2, 3, … in order.
    public func bind(_ values: [SQLValue]) throws {
        for (offset, value) in values.enumerated() { try bind(value, at: Int32(offset + 1)) }
    }

    /// Binds one value to the 1-based parameter `index`.
    public func bind(_ value: SQLValue, at index: Int32) throws {
        let status: Int32
        switch value {
        case .null: status = sqlite3_bind_null(pointer, index)
        case .integer(let number): status = sqlite3_bind_int64(pointer, index, number)
        case .text(let text):
            // With its byte length, never -1: a NUL inside the text would otherwise end it there,
            // and "b\u{0}x" would be bound, and compared, as "b".
            var text = text
            status = text.withUTF8 { bytes in
                guard let base = bytes.baseAddress else { return sqlite3_bind_text(pointer, index, "", 0, Statement.transient) }
                return UnsafeRawPointer(base).withMemoryRebound(to: CChar.self, capacity: bytes.count) {
                    sqlite3_bind_text(pointer, index, $0, Int32(bytes.count), Statement.transient)
                }
            }
        case .blob(let bytes):
            status = bytes.withUnsafeBytes { raw in
                sqlite3_bind_blob(pointer, index, raw.baseAddress ?? UnsafeRawPointer(bitPattern: 1), Int32(raw.count), Statement.transient)
            }
        }
        guard status == SQLITE_OK else { throw connection.error(status, sql: sql) }
    }

    /// Binds bytes as text without building a `String` first (they must be valid UTF-8).
    public func bindText(bytes: some ContiguousBytes, at index: Int32) throws {
        let status = bytes.withUnsafeBytes { raw -> Int32 in
            guard let base = raw.baseAddress else { return sqlite3_bind_text(pointer, index, "", 0, Statement.transient) }
            return sqlite3_bind_text(pointer, index, base.assumingMemoryBound(to: CChar.self), Int32(raw.count), Statement.transient)
        }
        guard status == SQLITE_OK else { throw connection.error(status, sql: sql) }
    }

    /// Steps once: true when a row is ready, false when the statement is done.
    @discardableResult
    public func step() throws -> Bool {
        let status = sqlite3_step(pointer)
        switch status {
        case SQLITE_ROW: return true
        case SQLITE_DONE: return false
        default: throw connection.error(status, sql: sql)
        }
    }

    /// Runs the statement to completion with `values` bound.
    public func run(_ values: SQLValue...) throws {
        reset()
        try bind(values)
        while try step() {}
    }

    /// Whether column `index` of the current row is NULL.
    public func isNull(_ index: Int32) -> Bool { sqlite3_column_type(pointer, index) == SQLITE_NULL }

    /// The storage class of column `index` of the current row.
    public func type(_ index: Int32) -> ColumnType {
        switch sqlite3_column_type(pointer, index) {
        case SQLITE_NULL: .null
        case SQLITE_INTEGER: .integer
        case SQLITE_FLOAT: .real
        case SQLITE_TEXT: .text
        default: .blob
        }
    }

    /// Column `index` of the current row as an integer.
    public func int64(_ index: Int32) -> Int64 { sqlite3_column_int64(pointer, index) }

    /// Column `index` of the current row as a double.
    public func double(_ index: Int32) -> Double { sqlite3_column_double(pointer, index) }

    /// Column `index` of the current row as text.
    public func string(_ index: Int32) -> String {
        guard let text = sqlite3_column_text(pointer, index) else { return "" }
        let count = Int(sqlite3_column_bytes(pointer, index))
        return String(decoding: UnsafeBufferPointer(start: text, count: count), as: UTF8.self)
    }

    /// Calls `body` with column `index`'s bytes, valid only during the call.
    public func withBytes<T>(_ index: Int32, _ body: (UnsafeRawBufferPointer) throws -> T) rethrows -> T {
        let base = sqlite3_column_blob(pointer, index)
        let count = Int(sqlite3_column_bytes(pointer, index))
        return try body(UnsafeRawBufferPointer(start: base, count: count))
    }

    /// Column `index` of the current row as bytes.
    public func bytes(_ index: Int32) -> [UInt8] { withBytes(index) { Array($0) } }

    /// How many times SQLite prepared this statement again since it was made (a schema change,
    /// or a new binding that may allow another plan when plans are not fixed).
    public var reprepares: Int32 { sqlite3_stmt_status(pointer, SQLITE_STMTSTATUS_REPREPARE, 0) }
}

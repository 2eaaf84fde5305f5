import CSQLite

/// The write-ahead log's shared-memory index, watched for commits without a lock or a system call.
///
/// Every commit to a database in WAL mode, from any connection of any process, rewrites the
/// index's header (https://www.sqlite.org/walformat.html, "The WAL-Index Format"): its frame
/// count grows, or its salts change when the log restarts, and its change counter moves on. So a
/// header read now that equals one read earlier means nothing was committed in between. Reading it
/// costs a few loads from memory SQLite already maps; `PRAGMA data_version`, which says the same,
/// takes a read lock on the index (`fcntl`), checks the file's size (`fstat`) and SQLite's mutexes.
///
/// The index stays mapped, at one address, while the watching connection is open; that
/// connection, a reader no one else uses, keeps the index from being reset by another process,
/// and the database in WAL mode (leaving it needs every other connection closed).
///
/// A header SQLite rebuilt from the log (the first connection after every other one closed, or
/// after a crash) has a change counter of 0, and the same log rebuilds the same header, so such a
/// header proves nothing: `header()` does not return it. Finding one when it starts, the watch
/// commits one write that changes no data (`PRAGMA user_version` set to its own value) so that
/// the counter moves on at once, instead of at the next commit.
public final class WALIndex: @unchecked Sendable {
    /// One whole header: two readings that are equal saw the same commit.
    public struct Header: Hashable, Sendable {
        let first: UInt64, second: UInt64, third: UInt64, fourth: UInt64, fifth: UInt64, sixth: UInt64
    }

    private let connection: Connection
    private let region: UnsafeRawPointer

    /// Watches the index of the database at `path` (in WAL mode) through a connection of its own.
    /// Throws when the database has no shared-memory index to watch.
    public init(path: String, busyTimeoutMilliseconds: Int32 = 10_000) throws {
        connection = try Connection(path: path, mode: .readWrite, busyTimeoutMilliseconds: busyTimeoutMilliseconds)
        guard try connection.text("PRAGMA journal_mode") == "wal" else {
            throw SQLiteError(code: SQLITE_NOTFOUND, message: "cannot watch the write-ahead log index: \(path) is not in WAL mode")
        }
        // A read opens the connection's view of the index (and its hold on it).
        _ = try connection.text("SELECT name FROM sqlite_master LIMIT 1")
        var mapped: UnsafeRawPointer?
        let status = deltasnap_sqlite_wal_index(connection.handle, &mapped)
        guard status == SQLITE_OK, let mapped else {
            throw SQLiteError(code: status, message: "cannot map the write-ahead log index: \(path)")
        }
        region = mapped
        if header() == nil {
            // A rebuilt header (or a writer between its copies): move the counter on, without waiting
            // for another process's write lock (failing that, the next commit moves it).
            connection.busyTimeoutMilliseconds = 0
            if let version = try? connection.integer("PRAGMA user_version") { try? connection.execute("PRAGMA user_version = \(version)") }
        }
        try connection.execute("PRAGMA query_only = 1")
    }

    /// The header now; nil while a writer is between its two copies, or when SQLite rebuilt it and
    /// nothing was committed since (then ask SQLite).
    public func header() -> Header? {
        var words: (UInt64, UInt64, UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0, 0, 0)
        let whole = withUnsafeMutableBytes(of: &words) { deltasnap_sqlite_wal_index_header(region, $0.baseAddress?.assumingMemoryBound(to: UInt64.self)) }
        guard whole == 1 else { return nil }
        return Header(first: words.0, second: words.1, third: words.2, fourth: words.3, fifth: words.4, sixth: words.5)
    }
}

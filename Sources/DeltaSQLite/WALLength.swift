import CSQLite

/// How many pages the write-ahead log held after the last commit on one connection, as SQLite
/// reports it to a WAL hook (`sqlite3_wal_hook`).
///
/// Installing it turns off the connection's automatic checkpoint (SQLite runs that from the same
/// hook), so its owner checkpoints when it chooses: the store does it off the writer's path
/// (`Checkpointer` in DeltaStore), instead of inside the commit a client is waiting for.
public final class WALLength: Sendable {
    private let pages = Locked(0)

    /// Starts at zero: nothing committed yet.
    public init() {}

    /// The WAL's length in pages after the last commit.
    public var current: Int { pages.withLock { $0 } }

    fileprivate func record(_ count: Int32) { pages.withLock { $0 = Int(count) } }
}

extension Connection {
    /// Reports every commit's WAL length to `length` and turns off this connection's automatic
    /// checkpoint. The connection holds `length` for as long as it is open.
    public func reportWALLength(to length: WALLength) {
        walLength = length
        sqlite3_wal_hook(
            handle,
            { context, _, _, pages in
                Unmanaged<WALLength>.fromOpaque(context!).takeUnretainedValue().record(pages)
                return SQLITE_OK
            }, Unmanaged.passUnretained(length).toOpaque())
    }
}

import DeltaSQLite
import Foundation

/// The read connections of a store, as GRDB's `DatabasePool` keeps them: reads run in parallel,
/// each on a connection of its own in WAL mode, while the one writer (`StoreQueue`) applies a
/// delta; each read sees one committed state.
///
/// Connections are opened as reads need them, up to `capacity`; a read beyond that waits for
/// one to come back. `exclusively` waits until no read is running and keeps new ones waiting
/// (a sign-out empties the logs meanwhile).
final class ReaderPool: @unchecked Sendable {
    /// How many connections at most: GRDB's default for its `DatabasePool`. A read mostly waits
    /// on the disk or on its caller (a `forEachRecord` body), not on a core, so more than the
    /// cores is useful; each connection costs its page cache.
    static let defaultCapacity = 5

    // Guarded by `condition`.
    private let condition = NSCondition()
    private var idle: [Connection]
    private var opened: Int
    /// False once opening another connection failed (a full disk, say): reads then share those open.
    private var growable = true
    private var exclusive = false
    private let capacity: Int
    private let open: () throws -> Connection

    /// A pool holding `first` (already open), which opens more with `open`.
    init(first: Connection, capacity: Int = ReaderPool.defaultCapacity, open: @escaping () throws -> Connection) {
        idle = [first]
        opened = 1
        self.capacity = max(1, capacity)
        self.open = open
    }

    /// Runs `body` on a connection no other read uses meanwhile.
    func read<T>(_ body: (Connection) throws -> T) throws -> T {
        let connection = try take()
        defer { give(connection) }
        return try body(connection)
    }

    /// Runs `body` while no read runs, and keeps reads waiting until it returns.
    func exclusively<T>(_ body: () throws -> T) rethrows -> T {
        condition.lock()
        while exclusive { condition.wait() }
        exclusive = true
        while idle.count < opened { condition.wait() }
        condition.unlock()
        defer {
            condition.lock()
            exclusive = false
            condition.broadcast()
            condition.unlock()
        }
        return try body()
    }

    private func take() throws -> Connection {
        condition.lock()
        defer { condition.unlock() }
        while true {
            if !exclusive, let connection = idle.popLast() { return connection }
            if !exclusive, growable, opened < capacity {
                opened += 1
                condition.unlock()
                do {
                    let connection = try open()
                    condition.lock()
                    return connection
                } catch {
                    condition.lock()
                    opened -= 1
                    condition.broadcast()
                    guard opened > 0 else { throw error }
                    growable = false
                    // A connection may have come back while this one was being opened.
                    continue
                }
            }
            condition.wait()
        }
    }

    private func give(_ connection: Connection) {
        condition.lock()
        idle.append(connection)
        condition.broadcast()
        condition.unlock()
    }
}

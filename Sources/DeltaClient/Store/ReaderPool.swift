import DeltaSQLite
import Foundation

/// The read connections of a store, as GRDB's `DatabasePool` keeps them: reads run in parallel,
/// each on a connection of its own in WAL mode, while the one writer (`StoreQueue`) applies a
/// delta; each read sees one committed state.
///
/// Connections are opened as reads need them, up to `capacity`; a read beyond that waits for
/// one to come back. `exclusively` waits until no read is running and keeps new ones waiting
/// (a sign-out empties the logs meanwhile).
///
/// A read nested in another on the same thread (a `ReplicaReader.record` inside a
/// `forEachRecord` body) never waits: the outer read cannot end before it, so waiting for a
/// connection that only outer reads hold, or for an `exclusively` that waits for the outer read,
/// would wait forever. It takes an idle connection, or opens one beyond `capacity`, closed again
/// when it comes back.
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
    /// The key of this pool's read depth in each thread's dictionary (`read`).
    private let depthKey: String

    /// A pool holding `first` (already open), which opens more with `open`.
    init(first: Connection, capacity: Int = ReaderPool.defaultCapacity, open: @escaping () throws -> Connection) {
        idle = [first]
        opened = 1
        self.capacity = max(1, capacity)
        self.open = open
        depthKey = "deltasnap.ReaderPool." + UUID().uuidString
    }

    /// How many connections are open, idle or in use (for tests).
    var openCount: Int {
        condition.lock()
        defer { condition.unlock() }
        return opened
    }

    /// Runs `body` on a connection no other read uses meanwhile.
    func read<T>(_ body: (Connection) throws -> T) throws -> T {
        let thread = Thread.current.threadDictionary
        let depth = thread[depthKey] as? Int ?? 0
        let connection = try take(nested: depth > 0)
        thread[depthKey] = depth + 1
        defer {
            if depth == 0 { thread.removeObject(forKey: depthKey) } else { thread[depthKey] = depth }
            give(connection)
        }
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

    /// A connection for a read; `nested` when this thread's read is inside another of its own.
    private func take(nested: Bool) throws -> Connection {
        condition.lock()
        defer { condition.unlock() }
        while true {
            let allowed = !exclusive || nested
            if allowed, let connection = idle.popLast() { return connection }
            if allowed, growable, opened < capacity || nested {
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
            if nested {
                // Waiting could be forever: only outer reads hold the connections, and they wait for this one.
                throw ReplicaError(
                    .store, "cannot read the local store: a read inside another read needs a connection of its own, and no more could be opened",
                    evidence: "\(opened) open, all in use; the store's file system may be full")
            }
            condition.wait()
        }
    }

    private func give(_ connection: Connection) {
        condition.lock()
        defer { condition.unlock() }
        if opened > capacity {
            // One a nested read opened beyond the capacity: closed as it comes back.
            opened -= 1
        } else {
            idle.append(connection)
        }
        condition.broadcast()
    }
}

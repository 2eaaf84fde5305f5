import DeltaSQLite
import DeltaStore
import Dispatch

/// Copies the write-ahead log back into the database file on a connection and thread of its
/// own, so that no commit waits for it.
///
/// SQLite's automatic checkpoint runs inside the commit that takes the log past 1,000 pages:
/// a push of 5,000 scattered edits paid about 10 ms for it before its answer. The writer's
/// connections report each commit's log length instead (`WALLength`); when it reaches
/// `threshold` pages, a `PASSIVE` checkpoint runs here (it never blocks the writer or readers),
/// and runs again if more commits came meanwhile. One that fails is retried after the next
/// commit, as the automatic one would be.
final class Checkpointer: Sendable {
    /// SQLite's own default for `wal_autocheckpoint`.
    static let defaultThreshold = 1_000

    private struct State {
        var connection: Connection?
        var running = false
        var again = false
    }

    private let state: Locked<State>
    private let queue = DispatchQueue(label: "deltasnap.checkpoint")
    private let threshold: Int

    /// Checkpoints `path` through a connection of its own.
    init(path: String, threshold: Int = Checkpointer.defaultThreshold) throws {
        state = Locked(State(connection: try Connection(path: path, mode: .readWrite)))
        self.threshold = threshold
    }

    /// Called after the writer commits: starts a checkpoint when the log has grown enough.
    func committed(walPages: Int) {
        guard walPages >= threshold else { return }
        let start: Bool = state.withLock { state in
            guard state.connection != nil else { return false }
            if state.running {
                state.again = true
                return false
            }
            state.running = true
            return true
        }
        if start { queue.async { self.run() } }
    }

    private func run() {
        while true {
            let connection = state.withLock { $0.connection }
            try? connection?.execute("PRAGMA wal_checkpoint(PASSIVE)")
            let more: Bool = state.withLock { state in
                if state.again && state.connection != nil {
                    state.again = false
                    return true
                }
                state.running = false
                return false
            }
            if !more { return }
        }
    }

    /// Lets a checkpoint the last commits asked for finish (a short-lived process, such as
    /// `deltasnap import` beside a running server, would otherwise leave its log to the server),
    /// then closes the connection; later commits start none.
    func close() {
        queue.sync {}
        let connection = state.withLock { state -> Connection? in
            defer { state.connection = nil }
            return state.connection
        }
        // One started in between still holds the connection: wait for it too.
        queue.sync {}
        withExtendedLifetime(connection) {}
    }
}

import DeltaSQLite

/// Up to `maximum` SQLite connections, each used by one caller at a time; callers wait in line.
final class ConnectionPool: Sendable {
    private struct State {
        var idle: [Connection] = []
        var created = 0
        var waiters: [CheckedContinuation<Connection, any Error>] = []
        var closed = false
    }

    private enum Decision {
        case use(Connection)
        case create
        case wait
        case fail
    }

    private let state = Locked(State())
    private let maximum: Int
    private let open: @Sendable () throws -> Connection

    init(maximum: Int, open: @escaping @Sendable () throws -> Connection) {
        self.maximum = maximum
        self.open = open
    }

    /// A connection for the caller's exclusive use; give it back with `checkin`.
    func checkout() async throws -> Connection {
        // Fast path: an idle connection, without suspending.
        if let idle = checkoutIdle() { return idle }
        return try await withCheckedThrowingContinuation { continuation in
            let decision: Decision = state.withLock { state in
                if state.closed { return .fail }
                if let connection = state.idle.popLast() { return .use(connection) }
                if state.created < maximum {
                    state.created += 1
                    return .create
                }
                state.waiters.append(continuation)
                return .wait
            }
            switch decision {
            case .use(let connection): continuation.resume(returning: connection)
            case .wait: break
            case .fail: continuation.resume(throwing: StoreError(.unavailable, "store", "closed"))
            case .create:
                do {
                    continuation.resume(returning: try open())
                } catch {
                    state.withLock { $0.created -= 1 }
                    continuation.resume(throwing: error)
                }
            }
        }
    }

    /// An idle connection, or nil when none is idle right now.
    func checkoutIdle() -> Connection? {
        state.withLock { $0.closed ? nil : $0.idle.popLast() }
    }

    /// Returns a connection; it must not be inside a transaction.
    func checkin(_ connection: Connection) {
        if connection.inTransaction { try? connection.execute("ROLLBACK") }
        let waiter: CheckedContinuation<Connection, any Error>? = state.withLock { state in
            if state.closed {
                state.created -= 1
                return nil
            }
            if !state.waiters.isEmpty { return state.waiters.removeFirst() }
            state.idle.append(connection)
            return nil
        }
        waiter?.resume(returning: connection)
    }

    /// Closes idle connections and fails everyone waiting; connections checked out close when returned.
    func close() {
        let waiters = state.withLock { state -> [CheckedContinuation<Connection, any Error>] in
            state.closed = true
            state.created -= state.idle.count
            state.idle.removeAll()
            defer { state.waiters.removeAll() }
            return state.waiters
        }
        for waiter in waiters { waiter.resume(throwing: StoreError(.unavailable, "store", "closed")) }
    }
}

import DeltaSQLite

/// Up to `maximum` database connections, each used by one caller at a time; callers wait in line.
///
/// Shared by the backends: SQLite opens its connections synchronously, PostgreSQL over the
/// network. A connection goes back with `checkin` when it is clean (no transaction open), or
/// with `discard` when it is broken, which frees its slot for a new one. Connections the pool
/// lets go of (discarded, idle at `close`, or returned after it) are handed to `retire`.
package final class ConnectionPool<Connection: Sendable>: Sendable {
    private struct State {
        var idle: [Connection] = []
        var created = 0
        /// Callers waiting: resumed with a connection, or with nil to open one themselves.
        var waiters: [CheckedContinuation<Connection?, any Error>] = []
        var closed = false
    }

    private enum Decision {
        case use(Connection)
        case create
        case wait
        case fail
    }

    private enum Next {
        case waiter(CheckedContinuation<Connection?, any Error>)
        case idle
        case retire
    }

    private let state = Locked(State())
    private let maximum: Int
    private let open: @Sendable () async throws -> Connection
    private let reset: @Sendable (Connection) -> Void
    private let retire: @Sendable (Connection) -> Void

    /// A pool of at most `maximum` connections made by `open`; `reset` runs on every checkin,
    /// `retire` closes a connection the pool lets go of.
    package init(
        maximum: Int, open: @escaping @Sendable () async throws -> Connection,
        reset: @escaping @Sendable (Connection) -> Void = { _ in },
        retire: @escaping @Sendable (Connection) -> Void = { _ in }
    ) {
        self.maximum = maximum
        self.open = open
        self.reset = reset
        self.retire = retire
    }

    /// A pool dropped without `close()` still retires its idle connections.
    deinit { close() }

    /// A connection for the caller's exclusive use; give it back with `checkin` or `discard`.
    /// Among idle connections, the newest one `preferred` accepts, else the newest.
    package func checkout(preferring preferred: (Connection) -> Bool = { _ in true }) async throws -> Connection {
        // Fast path: an idle connection, without suspending.
        if let idle = checkoutIdle(preferring: preferred) { return idle }
        let granted: Connection? = try await withCheckedThrowingContinuation { continuation in
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
            case .create: continuation.resume(returning: nil)
            case .wait: break
            case .fail: continuation.resume(throwing: StoreError(.unavailable, "store", "closed"))
            }
        }
        if let granted { return granted }
        // This caller holds a slot: open a connection for it, or give the slot back.
        do {
            return try await open()
        } catch {
            releaseSlot()
            throw error
        }
    }

    /// Adds a connection opened ahead of need as idle; it counts toward `maximum`. A pool that is
    /// full or closed retires it instead.
    package func adopt(_ connection: Connection) {
        let added = state.withLock { state -> Bool in
            guard !state.closed, state.created < maximum else { return false }
            state.created += 1
            return true
        }
        if added { checkin(connection) } else { retire(connection) }
    }

    /// An idle connection (the newest one `preferred` accepts, else the newest), or nil when
    /// none is idle right now.
    package func checkoutIdle(preferring preferred: (Connection) -> Bool = { _ in true }) -> Connection? {
        state.withLock { state in
            if state.closed { return nil }
            if let index = state.idle.lastIndex(where: preferred) { return state.idle.remove(at: index) }
            return state.idle.popLast()
        }
    }

    /// Returns a connection for the next caller.
    package func checkin(_ connection: Connection) {
        reset(connection)
        let next: Next = state.withLock { state in
            if state.closed {
                state.created -= 1
                return .retire
            }
            if !state.waiters.isEmpty { return .waiter(state.waiters.removeFirst()) }
            state.idle.append(connection)
            return .idle
        }
        switch next {
        case .waiter(let waiter): waiter.resume(returning: connection)
        case .idle: break
        case .retire: retire(connection)
        }
    }

    /// Retires a broken connection; its slot goes to the next caller.
    package func discard(_ connection: Connection) {
        retire(connection)
        releaseSlot()
    }

    private func releaseSlot() {
        let waiter: CheckedContinuation<Connection?, any Error>? = state.withLock { state in
            if !state.closed, !state.waiters.isEmpty { return state.waiters.removeFirst() }
            state.created -= 1
            return nil
        }
        waiter?.resume(returning: nil)
    }

    /// Stops handing out connections, fails everyone waiting, and retires the idle connections;
    /// connections checked out are retired when they come back.
    package func close() {
        let (idle, waiters) = state.withLock { state -> ([Connection], [CheckedContinuation<Connection?, any Error>]) in
            state.closed = true
            state.created -= state.idle.count
            defer {
                state.idle.removeAll()
                state.waiters.removeAll()
            }
            return (state.idle, state.waiters)
        }
        for waiter in waiters { waiter.resume(throwing: StoreError(.unavailable, "store", "closed")) }
        for connection in idle { retire(connection) }
    }
}

import DeltaStore

/// Requests held open by `?wait=SECONDS` until a commit may have changed what they asked for.
///
/// One poller per server reads the database's head every `interval` while anyone waits (one
/// cheap query however many wait, and it sees commits made by other processes and other server
/// instances too), and wakes the waiters whose last look is older than the head. A waiter's
/// first wake-up comes at the first tick after it starts, so a commit that landed between its
/// read and its wait is never missed: it re-reads at a time the tick has already seen.
actor LongPoll {
    private let store: any ChangeReader
    private let interval: Duration
    /// The most requests held at once; more get `503` with `Retry-After`.
    let maximumWaiting: Int
    private var waiters: [Int: Waiter] = [:]
    private var nextID = 0
    private var polling = false

    private struct Waiter {
        /// The head the waiter has re-read at (nil: not yet), and when it stops waiting.
        let seen: UInt64?
        let deadline: ContinuousClock.Instant
        let continuation: CheckedContinuation<UInt64?, Never>
    }

    init(store: any ChangeReader, interval: Duration = .milliseconds(250), maximumWaiting: Int) {
        self.store = store
        self.interval = interval
        self.maximumWaiting = maximumWaiting
    }

    /// Whether one more request may wait.
    func admits() -> Bool { waiters.count < maximumWaiting }

    /// Waits until the database's head differs from `seen` (or, with nil, the next tick), and
    /// returns that head; nil once `deadline` passes first.
    func next(after seen: UInt64?, until deadline: ContinuousClock.Instant) async -> UInt64? {
        await withCheckedContinuation { continuation in
            nextID += 1
            waiters[nextID] = Waiter(seen: seen, deadline: deadline, continuation: continuation)
            if !polling {
                polling = true
                Task { await self.poll() }
            }
        }
    }

    /// Ticks while anyone waits.
    private func poll() async {
        while !waiters.isEmpty {
            try? await Task.sleep(for: interval)
            let head = try? await store.headPosition()
            let now = ContinuousClock.now
            for (id, waiter) in waiters {
                if let head, waiter.seen != head {
                    waiters[id] = nil
                    waiter.continuation.resume(returning: head)
                } else if now >= waiter.deadline {
                    waiters[id] = nil
                    waiter.continuation.resume(returning: nil)
                }
            }
        }
        polling = false
    }
}

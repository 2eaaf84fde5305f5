import DeltaStore
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import Prometheus

/// Requests held open by `?wait=SECONDS` until a commit may have changed what they asked for:
/// the ones the router holds (`next`), and the raw path's, which wait in `room` (`WaitingRoom`).
///
/// One poller per server reads the database's head every `interval` while anyone waits (one
/// cheap query however many wait, and it sees commits made by other processes and other server
/// instances too), and at once when this server committed (`nudge`, after each write route). At
/// each look it lets the room decide its groups; the router's waiters whose last look is older
/// than the head are woken at most once an `interval` (each re-reads in full). A waiter's first
/// wake-up comes at the first look after it starts, so a commit that landed between its read and
/// its wait is never missed: it re-reads at a time the poller has already seen.
final class LongPoll: Sendable {
    private let store: any ChangeReader
    private let interval: Duration
    /// The most requests held at once, here and in the room; more get `503` with `Retry-After`.
    let maximumWaiting: Int
    /// The raw path's waiting requests (nil: only the router's, as in-process).
    let room: WaitingRoom?
    private let metrics: ServerMetrics
    private let state = NIOLockedValueBox(State())
    /// The loop whose timer ends the poller's pauses.
    private let timer = MultiThreadedEventLoopGroup.singleton.any()

    private struct Waiter {
        /// The head the waiter has re-read at (nil: not yet), and when it stops waiting.
        let seen: UInt64?
        let deadline: ContinuousClock.Instant
        let continuation: CheckedContinuation<UInt64?, Never>
    }

    private struct State {
        var waiters: [Int: Waiter] = [:]
        var nextID = 0
        var polling = false
        /// A commit came while the poller was not pausing: its next pause ends at once.
        var nudged = false
        /// The poller's pause, while it pauses.
        var pause: CheckedContinuation<Void, Never>?
        /// When the router's waiters were last woken.
        var lastWake: ContinuousClock.Instant?
    }

    init(store: any ChangeReader, interval: Duration = .milliseconds(250), maximumWaiting: Int, room: WaitingRoom? = nil, metrics: ServerMetrics) {
        self.store = store
        self.interval = interval
        self.maximumWaiting = maximumWaiting
        self.room = room
        self.metrics = metrics
    }

    /// Whether one more request may wait.
    func admits() -> Bool { state.withLockedValue { $0.waiters.count } + (room?.count ?? 0) < maximumWaiting }

    /// Waits until the database's head differs from `seen` (or, with nil, the next look), and
    /// returns that head; nil once `deadline` passes first.
    func next(after seen: UInt64?, until deadline: ContinuousClock.Instant) async -> UInt64? {
        await withCheckedContinuation { continuation in
            let start = state.withLockedValue { state in
                state.nextID += 1
                state.waiters[state.nextID] = Waiter(seen: seen, deadline: deadline, continuation: continuation)
                return Self.starts(&state)
            }
            metrics.waiting.increment()
            // Detached: the poller answers every waiter's request (`WaitingRoom.tick`), and must
            // not inherit the task-locals of the one that started it (`Caller.readingAs`).
            if start { Task.detached { await self.poll() } }
        }
    }

    /// Makes sure the poller runs: the room has a waiter.
    func roomEntered() {
        if state.withLockedValue({ Self.starts(&$0) }) { Task.detached { await self.poll() } }
    }

    /// This server committed: the poller looks at the head now, not at the end of its pause.
    func nudge() {
        let pause = state.withLockedValue { state -> CheckedContinuation<Void, Never>? in
            guard state.polling else { return nil }
            guard let pause = state.pause else {
                state.nudged = true
                return nil
            }
            state.pause = nil
            return pause
        }
        pause?.resume()
    }

    private static func starts(_ state: inout State) -> Bool {
        guard !state.polling else { return false }
        state.polling = true
        return true
    }

    /// Looks while anyone waits.
    private func poll() async {
        while true {
            await pause()
            let head = try? await store.headPosition()
            await room?.tick(head: head)
            let now = ContinuousClock.now
            let woken = state.withLockedValue { state -> [(CheckedContinuation<UInt64?, Never>, UInt64?)] in
                // The router's waiters re-read in full: at most once an interval, however often this server commits.
                guard state.lastWake.map({ now - $0 >= interval }) ?? true else { return [] }
                state.lastWake = now
                var woken: [(CheckedContinuation<UInt64?, Never>, UInt64?)] = []
                for (id, waiter) in state.waiters {
                    if let head, waiter.seen != head {
                        state.waiters[id] = nil
                        woken.append((waiter.continuation, head))
                    } else if now >= waiter.deadline {
                        state.waiters[id] = nil
                        woken.append((waiter.continuation, nil))
                    }
                }
                return woken
            }
            metrics.waiting.decrement(by: Double(woken.count))
            for (continuation, head) in woken { continuation.resume(returning: head) }
            let done = state.withLockedValue { state in
                guard state.waiters.isEmpty, room?.count ?? 0 == 0 else { return false }
                state.polling = false
                state.nudged = false
                return true
            }
            if done { return }
        }
    }

    /// Until `interval` passes or this server commits (at once when it committed meanwhile).
    private func pause() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let now = state.withLockedValue { state -> Bool in
                if state.nudged {
                    state.nudged = false
                    return true
                }
                state.pause = continuation
                return false
            }
            if now { return continuation.resume() }
            timer.scheduleTask(in: .nanoseconds(Int64(interval.components.seconds) * 1_000_000_000 + interval.components.attoseconds / 1_000_000_000)) {
                let pause = self.state.withLockedValue { state -> CheckedContinuation<Void, Never>? in
                    defer { state.pause = nil }
                    return state.pause
                }
                pause?.resume()
            }
        }
    }
}

import DeltaCore
import DeltaStore
import NIOConcurrencyHelpers
import NIOCore
import Prometheus

/// Live clients' requests (`?wait=`, docs/PROTOCOL.md "Live updates") held on the raw path
/// (`NotModifiedBeforeDecoding+Waiting`): no task, no router, no decoded request; the connection's
/// handler keeps its bytes, and the room keeps a few words for it.
///
/// Requests whose header blocks are the same bytes wait together, in one group: they ask the same
/// question of the same principal, so they get the same answer. Each time the database's head
/// moves (`LongPoll` calls `tick`), each group is decided once:
/// - its early verdict (the one the raw path answered `304` with) still holds: it goes on waiting,
///   and its requests whose `wait` has passed get that `304`;
/// - otherwise the router answers the request once, without `wait` (`SharedAnswer`), and every
///   request of the group gets those bytes (a `304` there means it goes on waiting);
/// - an answer the router could not give once (too large, or a request that cannot be rebuilt
///   exactly) sends each request to the router.
/// What the router answers is never decided here: the room only sends one answer of the router's
/// to requests identical to the one it answered, byte for byte, `Authorization` included. A
/// user's group is theirs alone (their token is in its bytes), and the router verifies that token
/// again at each answer: one that expired while it waited gets `401`, never a `304`.
final class WaitingRoom: Sendable {
    /// How a request's wait ends.
    enum Outcome: Sendable {
        /// Its validator is still current: the raw path's `304`.
        case notModified(Token, StateDigest)
        /// The router's answer to the same request, computed once.
        case answer(SharedAnswer)
        /// The router answers it (the request goes to the decoder as it came).
        case route
    }

    /// Ends one request's wait, on any thread (the handler hops to its event loop).
    typealias Deliver = @Sendable (Outcome) -> Void
    /// The early verdict on a request, as the raw path gives it (`NotModifiedBeforeDecoding.verdict`).
    typealias Verdict = @Sendable (RawRequest) -> EarlyVerdict
    /// The router's answer to a request (its header block, asked on `channel`), or nil when it
    /// cannot be given once for many (`SharedAnswer.compute`).
    typealias Compute = @Sendable (_ request: RawRequest, _ headerBlock: ByteBuffer, _ channel: any Channel) async -> SharedAnswer?

    private struct Waiter {
        let deliver: Deliver
        let deadline: NIODeadline
        /// The connection it came on: the context of the router's answer, if one is computed.
        let channel: any Channel
    }

    private struct Group {
        let request: RawRequest
        var waiters: [Int: Waiter] = [:]
        /// The head the group was last decided at (nil: not yet).
        var seen: UInt64?
        /// The earliest deadline among its waiters.
        var earliest: NIODeadline = .distantFuture
    }

    private struct State {
        /// By header block (its bytes are the group's question).
        var groups: [ByteBuffer: Group] = [:]
        /// Each waiter's group, for `leave`.
        var tickets: [Int: ByteBuffer] = [:]
        var nextTicket = 0
    }

    /// What the group's question came to at a tick.
    private enum Decision {
        /// Not modified: a `304` for those whose wait passed (the raw path's, or the router's bytes).
        case current(Outcome)
        /// Changed: this for every waiter.
        case changed(Outcome)
    }

    private let state = NIOLockedValueBox(State())
    private let verdict: Verdict
    private let compute: Compute
    private let metrics: ServerMetrics

    init(verdict: @escaping Verdict, compute: @escaping Compute, metrics: ServerMetrics) {
        self.verdict = verdict
        self.compute = compute
        self.metrics = metrics
    }

    /// How many requests wait here.
    var count: Int { state.withLockedValue { $0.tickets.count } }

    /// Holds `request` (its header block the bytes of `headerBlock`) until `deadline`; returns
    /// the ticket to `leave` with.
    func enter(_ request: RawRequest, headerBlock: ByteBuffer, channel: any Channel, deadline: NIODeadline, deliver: @escaping Deliver) -> Int {
        state.withLockedValue { state in
            state.nextTicket += 1
            let ticket = state.nextTicket
            // The key's own bytes, sized to them: the read buffer they came in may be much larger.
            let key = state.groups.index(forKey: headerBlock).map { state.groups.keys[$0] } ?? ByteBuffer(bytes: headerBlock.readableBytesView)
            state.groups[key, default: Group(request: request)].waiters[ticket] = Waiter(deliver: deliver, deadline: deadline, channel: channel)
            state.groups[key]!.earliest = min(state.groups[key]!.earliest, deadline)
            state.tickets[ticket] = key
            metrics.waiting.increment()
            return ticket
        }
    }

    /// Forgets a waiter whose connection closed (nothing is delivered to it).
    func leave(_ ticket: Int) {
        state.withLockedValue { state in
            guard let key = state.tickets.removeValue(forKey: ticket) else { return }
            metrics.waiting.decrement()
            state.groups[key]?.waiters[ticket] = nil
            if state.groups[key]?.waiters.isEmpty == true { state.groups[key] = nil }
        }
    }

    /// Ends a waiter's wait at the next look, as if its deadline had passed (its client ended
    /// its input); false when it no longer waits.
    func hurry(_ ticket: Int, now: NIODeadline = .now()) -> Bool {
        state.withLockedValue { state in
            guard let key = state.tickets[ticket], let waiter = state.groups[key]?.waiters[ticket] else { return false }
            state.groups[key]!.waiters[ticket] = Waiter(deliver: waiter.deliver, deadline: now, channel: waiter.channel)
            state.groups[key]!.earliest = now
            return true
        }
    }

    /// Decides every group that has not been decided at `head` (nil: the head could not be read),
    /// or that holds a request whose wait has passed, and ends the waits that end.
    func tick(head: UInt64?, now: NIODeadline = .now()) async {
        let due = state.withLockedValue { state in
            state.groups.compactMap { key, group -> (key: ByteBuffer, request: RawRequest, channel: any Channel, expiring: Bool)? in
                guard (head != nil && group.seen != head) || group.earliest <= now, let channel = group.waiters.first?.value.channel else { return nil }
                return (key, group.request, channel, group.earliest <= now)
            }
        }
        for group in due {
            let decision = await decide(group.request, headerBlock: group.key, channel: group.channel, expiring: group.expiring)
            let ended: [(Deliver, Outcome)] = state.withLockedValue { state in
                guard var waiting = state.groups[group.key] else { return [] }
                var ended: [(Deliver, Outcome)] = []
                switch decision {
                case .changed(let outcome):
                    for (ticket, waiter) in waiting.waiters {
                        state.tickets[ticket] = nil
                        ended.append((waiter.deliver, outcome))
                    }
                    state.groups[group.key] = nil
                    return ended
                case .current(let outcome):
                    if head != nil { waiting.seen = head }
                    if waiting.earliest <= now {
                        waiting.earliest = .distantFuture
                        for (ticket, waiter) in waiting.waiters {
                            if waiter.deadline <= now {
                                waiting.waiters[ticket] = nil
                                state.tickets[ticket] = nil
                                ended.append((waiter.deliver, outcome))
                            } else {
                                waiting.earliest = min(waiting.earliest, waiter.deadline)
                            }
                        }
                    }
                    state.groups[group.key] = waiting.waiters.isEmpty ? nil : waiting
                    return ended
                }
            }
            if case .changed(.answer) = decision, !ended.isEmpty { metrics.sharedAnswers.increment() }
            metrics.waiting.decrement(by: Double(ended.count))
            for (deliver, outcome) in ended { deliver(outcome) }
        }
    }

    /// The group's question at this tick: its early verdict, then, when that does not say "not
    /// modified", the router's answer, once for the group. A cross-origin group whose waits end
    /// now (`expiring`) gets the router's `304` too: only the router's carries CORS headers.
    private func decide(_ request: RawRequest, headerBlock: ByteBuffer, channel: any Channel, expiring: Bool) async -> Decision {
        var current: (token: Token, digest: StateDigest)?
        switch verdict(request) {
        case .notModified(let token, let digest):
            current = (token, digest)
        case .ask(let ask):
            current = await withCheckedContinuation { continuation in ask { continuation.resume(returning: $0) } }
        case .unknown:
            break
        }
        if let current, !(request.hasOrigin && expiring) { return .current(.notModified(current.token, current.digest)) }
        // The same bytes carry the same credential: the router verifies it and answers for exactly that principal.
        guard let answer = await compute(request, headerBlock, channel) else { return .changed(.route) }
        return answer.status == 304 ? .current(.answer(answer)) : .changed(.answer(answer))
    }
}

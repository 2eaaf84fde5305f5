import DeltaSQLite
import Foundation

/// Tells live queries that a collection's visible records may have changed: whenever a writer
/// commits rows of it (`ChangeLog`: a delta, a reset, a push's answers, a local `put`, `delete`
/// or `resolve`, a sign-out). Each subscriber watches one collection and holds at most one
/// pending signal, so a burst of changes costs it one re-run of its query, never a queue.
///
/// One hub per store file in a process (`shared(for:)`): two `Replica` objects on one store (an
/// app and its widget in one process) wake each other's live queries.
///
/// Another process's commits (an app extension sharing the store through an app group, or
/// `deltasnap put`) leave no note here: while any live query listens, the store's and the
/// outbox's `PRAGMA data_version` are read once every `externalInterval` on a connection of the
/// hub's own, and a change wakes every live query of the store; each re-reads, and yields only if
/// its result changed. Our own commits move it too: a change seen while this process also wrote
/// is published once the process has been quiet for a look, or after `externalPatience`, so
/// another process's commit shows within about a second, or within about five while this
/// process writes without a pause; and the app's own writes cost a whole re-read at most once
/// per burst, not once a second. Meanwhile no result mixes states: the files count their commits
/// (`CommitCount`), and a live query whose patch finds a count it was not told of reads its whole
/// result instead.
final class ChangeHub: Sendable {
    private static let hubs = Locked([String: ChangeHub]())
    /// How often another process's commits are looked for while a live query listens.
    static let externalInterval = Duration.seconds(1)
    /// How long a change seen while this process also wrote may wait for the process to be quiet.
    static let externalPatience = Duration.seconds(5)

    /// The process's hub for the store at `storeURL` (its path with symbolic links resolved).
    static func shared(for storeURL: URL) -> ChangeHub {
        let key = storeURL.standardizedFileURL.resolvingSymlinksInPath().path
        return hubs.withLock { hubs in
            if let hub = hubs[key] { return hub }
            let hub = ChangeHub(storeURL: URL(fileURLWithPath: key))
            hubs[key] = hub
            return hub
        }
    }

    /// The store whose other writers `watch` looks for.
    private let storeURL: URL

    private init(storeURL: URL) { self.storeURL = storeURL }

    private struct Subscriber {
        let collection: String
        let continuation: AsyncStream<Void>.Continuation
        /// What changed in its collection since it last took its changes.
        var pending: ChangedRows.Rows?
    }

    /// Everything the hub keeps, under one lock: a live query takes its changes and its quiet
    /// mark in one step, and a write's changes reach the subscribers in the same step as its end
    /// is counted, so the two always agree (`quietMark`).
    private struct State {
        var subscribers: [UUID: Subscriber] = [:]
        /// Whether `watch` runs for the subscribers.
        var watching = false
        /// While a sync or a sign-out holds the hub: how many hold it, and the rows changed
        /// meanwhile, delivered when the last lets go or at a `flush`.
        var holds = 0
        var held = ChangedRows.nothing
        /// This process's writes: how many are running (begun, their changes not yet delivered
        /// or held), and how many ended.
        var running = 0
        var writesEnded: UInt64 = 0
        /// How many deliveries of changes to the subscribers there were.
        var deliveries: UInt64 = 0
        /// Both files' counts of commits (`CommitCount`) up to which every commit's changes have
        /// been delivered, or held: this process's by their rows, another's by a `watch` that
        /// woke every live query; nil until a `watch` first looked.
        var commits: CommitCount.Counts?
        /// The numbers of this process's recent commits (`CommitCount.own`), delivered or held,
        /// by file: `commits` moves through them.
        var own = (store: Set<Int64>(), outbox: Set<Int64>())

        /// Notes this process's commits `made` (their changes delivered or held now), and moves
        /// `commits` through them.
        mutating func note(_ made: CommitCount.Own) {
            // Before a first look nothing is known to move through: nothing to keep.
            guard commits != nil else { return }
            own.store.formUnion(made.store)
            own.outbox.formUnion(made.outbox)
            advance()
        }

        /// Moves `commits` through this process's commits that follow it.
        mutating func advance() {
            guard var counts = commits else { return }
            counts.store = Self.through(counts.store, &own.store)
            counts.outbox = Self.through(counts.outbox, &own.outbox)
            commits = counts
        }

        /// `count` moved through the numbers of `own` that follow it one by one. The newest
        /// numbers are kept (a look that read its count a moment ago may move through them
        /// again), at most a few hundred.
        private static func through(_ count: Int64, _ own: inout Set<Int64>) -> Int64 {
            var count = count
            while own.contains(count &+ 1) { count &+= 1 }
            if own.count > 1_024 { own = Set(own.sorted().suffix(256)) }
            return count
        }

        /// Adds `changed` to its subscribers' pending changes; returns whom to wake.
        mutating func deliver(_ changed: ChangedRows) -> [AsyncStream<Void>.Continuation] {
            guard !changed.isEmpty else { return [] }
            deliveries &+= 1
            var woken: [AsyncStream<Void>.Continuation] = []
            for (id, subscriber) in subscribers {
                guard let rows = changed.rows(of: subscriber.collection) else { continue }
                subscribers[id]?.pending = subscriber.pending.map { $0.union(rows) } ?? rows
                woken.append(subscriber.continuation)
            }
            return woken
        }

        /// Delivers `changed`, or keeps it for the end of a hold (unless `now`).
        mutating func publish(_ changed: ChangedRows, now: Bool) -> [AsyncStream<Void>.Continuation] {
            if holds > 0, !now {
                held.formUnion(changed)
                return []
            }
            return deliver(changed)
        }

        /// See `ChangeHub.quietMark`.
        var quietMark: QuietMark? { running == 0 && held.isEmpty ? QuietMark(deliveries: deliveries, commits: commits) : nil }
    }

    /// A moment when every change this process committed had reached the live queries; see
    /// `quietMark`.
    struct QuietMark: Sendable, Equatable {
        /// How many deliveries there had been.
        let deliveries: UInt64
        /// The files' counts of commits up to which all had been delivered; nil when unknown.
        let commits: CommitCount.Counts?
    }

    /// One live query's wake-ups; `ChangeHub.take` gives what changed in its collection.
    struct Subscription: Sendable {
        /// A wake-up after each change (at most one waiting).
        let wakes: AsyncStream<Void>
        fileprivate let id: UUID
    }

    private let state = Locked(State())

    private func wake(_ continuations: [AsyncStream<Void>.Continuation]) {
        for continuation in continuations { continuation.yield() }
    }

    /// Keeps what commits change from the live queries until `release` (or a `flush`), so they
    /// see the end of a multi-step change, not its steps.
    func hold() { state.withLock { $0.holds += 1 } }

    /// Ends a `hold`; the last one delivers what changed meanwhile.
    func release() {
        wake(
            state.withLock { state in
                state.holds -= 1
                guard state.holds == 0 else { return [] }
                defer { state.held = .nothing }
                return state.deliver(state.held)
            })
    }

    /// Delivers what changed so far under a hold, which goes on.
    func flush() {
        wake(
            state.withLock { state in
                defer { state.held = .nothing }
                return state.deliver(state.held)
            })
    }

    /// A wake-up each time `collection` may have changed, for as long as its `wakes` are
    /// iterated; `take` says which rows did.
    func subscribe(to collection: String) -> Subscription {
        let (stream, continuation) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        let id = UUID()
        let start = state.withLock { state -> Bool in
            state.subscribers[id] = Subscriber(collection: collection, continuation: continuation)
            defer { state.watching = true }
            return !state.watching
        }
        continuation.onTermination = { [state] _ in _ = state.withLock { $0.subscribers.removeValue(forKey: id) } }
        if start { Task.detached { [self] in await watch() } }
        return Subscription(wakes: stream, id: id)
    }

    /// The rows of `subscription`'s collection changed since it last took them (nil when none
    /// did), and the quiet mark at that moment, in one step.
    func take(_ subscription: Subscription) -> (rows: ChangedRows.Rows?, mark: QuietMark?) {
        state.withLock { state in
            defer { state.subscribers[subscription.id]?.pending = nil }
            return (state.subscribers[subscription.id]?.pending, state.quietMark)
        }
    }

    /// Wakes every live query when another connection (another process's, most usefully) has
    /// committed to the store or the outbox since the last look; ends when no live query listens.
    private func watch() async {
        /// The watch's connection, used by one look at a time, off Swift's cooperative pool.
        final class Look: @unchecked Sendable {
            var connection: Connection?
        }
        let look = Look()
        var seen: [Int64]?
        var first = true
        // This process's writes as of the look before, and since when a change that our own
        // writes may explain has waited to be published.
        var ownBefore: (running: Int, ended: UInt64)?
        var deferredSince: ContinuousClock.Instant?
        while true {
            if !first { try? await Task.sleep(for: Self.externalInterval) }
            first = false
            let listening = state.withLock { state -> Bool in
                if state.subscribers.isEmpty { state.watching = false }
                return !state.subscribers.isEmpty
            }
            guard listening else { return }
            do {
                // Taken before the versions: a write of ours between the two counts as another's.
                let own = state.withLock { ($0.running, $0.writesEnded) }
                let quiet = own.0 == 0 && ownBefore.map { $0.running == 0 && $0.ended == own.1 } ?? true
                ownBefore = own
                let (versions, commits) = try await background { [storeURL] in
                    let connection = try look.connection ?? ReplicaFiles.readerConnection(storeURL)
                    look.connection = connection
                    let versions = [try connection.integer("PRAGMA main.data_version") ?? 0, try connection.integer("PRAGMA outbox.data_version") ?? 0]
                    return (versions, try CommitCount.read(connection))
                }
                // The first look wakes the live queries too: a commit between a query's first read
                // and this look moved no version this hub has seen.
                if seen != versions { deferredSince = deferredSince ?? .now }
                seen = versions
                // A change while this process wrote nothing is another's: published now. One while it
                // wrote may be its own writes alone, already published row by row: it waits until the
                // process is quiet, or `externalPatience`, so that a burst of the app's own writes
                // does not make every live query read its whole result once a second.
                if let since = deferredSince, quiet || ContinuousClock.now - since >= Self.externalPatience {
                    deferredSince = nil
                    // Every commit up to the count read is now delivered (every row is `unknown`).
                    wake(
                        state.withLock { state in
                            defer {
                                state.commits = commits
                                state.advance()
                            }
                            return state.publish(.everything, now: false)
                        })
                }
            } catch {
                // Looked for again at the next turn, on a new connection (the store may be being rebuilt).
                look.connection = nil
                seen = nil
            }
        }
    }

    /// Runs `body`, the transactions of a writer connection with `ChangeLog`'s triggers, then
    /// publishes what they wrote (`ChangeLog.drain`; see `publish`), or everything when
    /// `wakingAll` (a connection with `CommitCount`'s triggers alone). Notes that cannot be read
    /// wake every live query: a missed change would leave one showing stale rows.
    func writing<T>(on connection: Connection, now: Bool = false, wakingAll: Bool = false, _ body: () throws -> T) rethrows -> T {
        state.withLock { $0.running += 1 }
        defer {
            let noted = (try? ChangeLog.drain(connection)) ?? .everything
            let changed = wakingAll ? .everything : noted
            // Unread, they leave a gap in the count: live queries read whole results until a `watch`.
            let made = (try? CommitCount.own(connection)) ?? CommitCount.Own()
            wake(
                state.withLock { state in
                    state.running -= 1
                    state.writesEnded &+= 1
                    defer { state.note(made) }
                    return state.publish(changed, now: now)
                })
        }
        return try body()
    }

    /// A mark of a moment when every change this process committed had reached the live queries
    /// (nil when a write was running, or a hold kept changes back): a live query that took its
    /// changed rows with the mark (`take`) and finds the same mark after reading them has read
    /// them in a state no write of this process has moved since. If the files' counts of commits
    /// it read with them are also the mark's `commits`, no other process's commit came between
    /// either, so the rows it patched and the rows it kept are of one state (`ResultPatch`).
    func quietMark() -> QuietMark? { state.withLock { $0.quietMark } }

    /// Wakes the subscribers of the collections `changed` names (all of them for `everything`);
    /// under a `hold`, later, unless `now`.
    func publish(_ changed: ChangedRows, now: Bool = false) {
        wake(state.withLock { $0.publish(changed, now: now) })
    }
}

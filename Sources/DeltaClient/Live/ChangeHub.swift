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
/// its result changed. Our own commits move it too, so a live query may re-read once a second
/// more while this process writes, never more.
final class ChangeHub: Sendable {
    private static let hubs = Locked([String: ChangeHub]())
    /// How often another process's commits are looked for while a live query listens.
    static let externalInterval = Duration.seconds(1)

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
    }

    /// The subscribers, and whether `watch` runs for them.
    private let state = Locked((subscribers: [UUID: Subscriber](), watching: false))
    /// While a sync or a sign-out holds the hub: how many hold it, and the collections changed
    /// meanwhile (nil: every collection), published when the last lets go or at a `flush`.
    private let held = Locked((count: 0, pending: Set<String>?.some([])))

    /// Keeps what commits change from the live queries until `release` (or a `flush`), so they
    /// see the end of a multi-step change, not its steps.
    func hold() { held.withLock { $0.count += 1 } }

    /// Ends a `hold`; the last one publishes what changed meanwhile.
    func release() {
        let pending = held.withLock { held -> Set<String>?? in
            held.count -= 1
            guard held.count == 0 else { return .none }
            defer { held.pending = [] }
            return .some(held.pending)
        }
        if case .some(let collections) = pending { signal(collections) }
    }

    /// Publishes what changed so far under a hold, which goes on.
    func flush() {
        let pending = held.withLock { held in
            defer { held.pending = [] }
            return held.pending
        }
        if pending != [] { signal(pending) }
    }

    /// A signal each time `collection` may have changed, for as long as it is iterated.
    func signals(of collection: String) -> AsyncStream<Void> {
        let (stream, continuation) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        let id = UUID()
        let start = state.withLock { state -> Bool in
            state.subscribers[id] = Subscriber(collection: collection, continuation: continuation)
            defer { state.watching = true }
            return !state.watching
        }
        continuation.onTermination = { [state] _ in _ = state.withLock { $0.subscribers.removeValue(forKey: id) } }
        if start { Task.detached { [self] in await watch() } }
        return stream
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
        while true {
            if !first { try? await Task.sleep(for: Self.externalInterval) }
            first = false
            let listening = state.withLock { state -> Bool in
                if state.subscribers.isEmpty { state.watching = false }
                return !state.subscribers.isEmpty
            }
            guard listening else { return }
            do {
                let versions = try await background { [storeURL] in
                    let connection = try look.connection ?? ReplicaFiles.readerConnection(storeURL)
                    look.connection = connection
                    return [try connection.integer("PRAGMA main.data_version") ?? 0, try connection.integer("PRAGMA outbox.data_version") ?? 0]
                }
                // The first look wakes the live queries too: a commit between a query's first read
                // and this look moved no version this hub has seen.
                if seen != versions { publish(nil) }
                seen = versions
            } catch {
                // Looked for again at the next turn, on a new connection (the store may be being rebuilt).
                look.connection = nil
                seen = nil
            }
        }
    }

    /// Publishes what `connection`'s transactions wrote since the last call (`ChangeLog.drain`);
    /// see `publish`. Notes that cannot be read wake every live query: a missed change would
    /// leave one showing stale rows.
    func publishCommits(of connection: Connection, now: Bool = false) {
        publish((try? ChangeLog.drain(connection)) ?? nil, now: now)
    }

    /// Signals the subscribers of `collections`, or of every collection when nil; under a
    /// `hold`, later, unless `now`.
    func publish(_ collections: Set<String>?, now: Bool = false) {
        let now = held.withLock { held -> Bool in
            guard held.count > 0, !now else { return true }
            if let collections { held.pending?.formUnion(collections) } else { held.pending = nil }
            return false
        }
        if now { signal(collections) }
    }

    private func signal(_ collections: Set<String>?) {
        if collections == [] { return }
        let chosen = state.withLock { state in state.subscribers.values.filter { collections?.contains($0.collection) ?? true } }
        for subscriber in chosen { subscriber.continuation.yield() }
    }
}

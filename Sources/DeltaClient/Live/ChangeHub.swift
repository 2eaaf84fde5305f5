import DeltaSQLite
import Foundation

/// Tells live queries that a collection's visible records may have changed: whenever a writer
/// commits rows of it (`ChangeLog`: a delta, a reset, a push's answers, a local `put`, `delete`
/// or `resolve`, a sign-out). Each subscriber watches one collection and holds at most one
/// pending signal, so a burst of changes costs it one re-run of its query, never a queue.
///
/// One hub per store file in a process (`shared(for:)`): two `Replica` objects on one store (an
/// app and its widget in one process) wake each other's live queries.
final class ChangeHub: Sendable {
    private static let hubs = Locked([String: ChangeHub]())

    /// The process's hub for the store at `storeURL` (its path with symbolic links resolved).
    static func shared(for storeURL: URL) -> ChangeHub {
        let key = storeURL.standardizedFileURL.resolvingSymlinksInPath().path
        return hubs.withLock { hubs in
            if let hub = hubs[key] { return hub }
            let hub = ChangeHub()
            hubs[key] = hub
            return hub
        }
    }

    private struct Subscriber {
        let collection: String
        let continuation: AsyncStream<Void>.Continuation
    }

    private let subscribers = Locked([UUID: Subscriber]())
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
        subscribers.withLock { $0[id] = Subscriber(collection: collection, continuation: continuation) }
        continuation.onTermination = { [subscribers] _ in _ = subscribers.withLock { $0.removeValue(forKey: id) } }
        return stream
    }

    /// Signals the subscribers of `collections`, or of every collection when nil; under a
    /// `hold`, later.
    func publish(_ collections: Set<String>?) {
        let now = held.withLock { held -> Bool in
            guard held.count > 0 else { return true }
            if let collections { held.pending?.formUnion(collections) } else { held.pending = nil }
            return false
        }
        if now { signal(collections) }
    }

    private func signal(_ collections: Set<String>?) {
        if collections == [] { return }
        let chosen = subscribers.withLock { all in all.values.filter { collections?.contains($0.collection) ?? true } }
        for subscriber in chosen { subscriber.continuation.yield() }
    }
}

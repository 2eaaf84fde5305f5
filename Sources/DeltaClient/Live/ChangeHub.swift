import DeltaSQLite
import Foundation

/// Tells live queries that a collection's visible records may have changed: after a delta or a
/// reset is committed, after a push settles, after a local `put`, `delete` or `resolve`, after a
/// sign-out. Each subscriber watches one collection and holds at most one pending signal, so a
/// burst of changes costs it one re-run of its query, never a queue.
final class ChangeHub: Sendable {
    private struct Subscriber {
        let collection: String
        let continuation: AsyncStream<Void>.Continuation
    }

    private let subscribers = Locked([UUID: Subscriber]())

    /// A signal each time `collection` may have changed, for as long as it is iterated.
    func signals(of collection: String) -> AsyncStream<Void> {
        let (stream, continuation) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        let id = UUID()
        subscribers.withLock { $0[id] = Subscriber(collection: collection, continuation: continuation) }
        continuation.onTermination = { [subscribers] _ in _ = subscribers.withLock { $0.removeValue(forKey: id) } }
        return stream
    }

    /// Signals the subscribers of `collections`, or of every collection when nil.
    func publish(_ collections: Set<String>?) {
        let chosen = subscribers.withLock { all in all.values.filter { collections?.contains($0.collection) ?? true } }
        for subscriber in chosen { subscriber.continuation.yield() }
    }
}

import DeltaCore
import Foundation

extension Replica {
    /// A live query: yields `query`'s result at once, then again each time it changed, after a
    /// delta or a reset, a push, a local `put`, `delete` or `resolve`, or a sign-out; never for a
    /// change that leaves the result as it was (another collection, another record, a write of
    /// the same value). A consumer slower than the changes gets the latest result, not a backlog.
    ///
    /// What wakes it is SQLite's own record of each commit (temporary triggers note the
    /// collection of every row written), whatever wrote it: this replica, another `Replica` on
    /// the same store file in this process, or `ReplicaFiles`. Another process's commits are
    /// seen within about a second (`PRAGMA data_version`, read once a second while a live query
    /// listens).
    ///
    /// The query runs off the caller's thread, on a reader that does not wait for a running sync.
    /// The sequence ends when the iterating task is cancelled, and throws if the store cannot be read.
    public func observe(_ query: RecordQuery) -> AsyncThrowingStream<[Record], any Error> {
        observe(query) { $0 }
    }

    /// `observe`, with each result mapped by `transform` (off the caller's thread) and compared
    /// before and after: the typed collections' live queries.
    func observe<Value: Sendable>(
        _ query: RecordQuery, _ transform: @escaping @Sendable ([Record]) throws -> Value
    ) -> AsyncThrowingStream<Value, any Error> {
        // Subscribed before the first read, so that no change between the two is missed.
        let signals = changes.signals(of: query.collection)
        let (stream, continuation) = AsyncThrowingStream.makeStream(of: Value.self, bufferingPolicy: .bufferingNewest(1))
        let task = Task { [reader] in
            do {
                var last: [Record]?
                var iterator = signals.makeAsyncIterator()
                repeat {
                    let previous = last
                    let (records, value) = try await background { () -> ([Record], Value?) in
                        let records = try reader.query(query)
                        return (records, records == previous ? nil : try transform(records))
                    }
                    if let value {
                        last = records
                        continuation.yield(value)
                    }
                } while await iterator.next() != nil
                continuation.finish()
            } catch {
                continuation.finish(throwing: error)
            }
        }
        continuation.onTermination = { _ in task.cancel() }
        return stream
    }
}

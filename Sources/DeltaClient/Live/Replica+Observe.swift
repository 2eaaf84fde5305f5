import DeltaCore
import Foundation

extension Replica {
    /// A live query: yields `query`'s result at once, then again each time it changed, after a
    /// delta or a reset, a push, a local `put`, `delete` or `resolve`, or a sign-out; never for a
    /// change that leaves the result as it was (another collection, another record, a write of
    /// the same value). A consumer slower than the changes gets the latest result, not a backlog.
    ///
    /// What wakes it is SQLite's own record of each commit (temporary triggers note the
    /// collection and id of every row written), whatever wrote it: this replica, another `Replica` on
    /// the same store file in this process, or `ReplicaFiles`. Another process's commits are
    /// seen within about a second (`PRAGMA data_version`, read once a second while a live query
    /// listens), or within about five while this process writes without a pause.
    ///
    /// After a commit of a few rows, a query whose result holds every record it matches (no
    /// `offset`; no `limit`, or fewer records than it) reads those rows alone and patches its
    /// result (`ResultPatch`); other queries, and any after a reset or a large delta, read their
    /// whole result again.
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
        observe(query, updating: { records, _ in try transform(records) })
    }

    /// `observe`, with each result mapped by `transform`, which is also given the result before
    /// and what it made of it (nil the first time), so that it may keep what did not change: a
    /// typed live query decodes only the records that did.
    func observe<Value: Sendable>(
        _ query: RecordQuery, updating transform: @escaping @Sendable ([Record], _ previous: (records: [Record], value: Value)?) throws -> Value
    ) -> AsyncThrowingStream<Value, any Error> {
        // Subscribed before the first read, so that no change between the two is missed.
        let subscription = changes.subscribe(to: query.collection)
        let (stream, continuation) = AsyncThrowingStream.makeStream(of: Value.self, bufferingPolicy: .bufferingNewest(1))
        let task = Task { [reader, changes] in
            do {
                var last: [Record]?
                var lastValue: Value?
                var iterator = subscription.wakes.makeAsyncIterator()
                var (rows, mark): (ChangedRows.Rows?, ChangeHub.QuietMark?) = (.unknown, changes.quietMark())
                while true {
                    // nil: what woke this was taken at the turn before.
                    if let rows {
                        let (previous, previousValue, mark) = (last, lastValue, mark)
                        let (records, value) = try await background { () -> ([Record]?, Value?) in
                            var records: [Record]?
                            if let previous, let mark, let known = mark.commits, case .ids(let ids) = rows,
                                ResultPatch.applies(to: query, previous: previous)
                            {
                                let patch = try ResultPatch.patched(previous, query, ids: ids, reader: reader)
                                records = patch.records
                                // A write of this process ran meanwhile, or the rows were read after a
                                // commit no one told this query of (another process's): the patched
                                // rows may be of a later state than the kept ones; read the whole
                                // result (one state).
                                if patch.commits != known || changes.quietMark() != mark { records = try reader.query(query) }
                            } else {
                                records = try reader.query(query)
                            }
                            if records == previous { records = nil }
                            let before = previous.flatMap { records in previousValue.map { (records: records, value: $0) } }
                            return (records, try records.map { try transform($0, before) })
                        }
                        if let records, let value {
                            (last, lastValue) = (records, value)
                            continuation.yield(value)
                        }
                    }
                    guard await iterator.next() != nil else { break }
                    (rows, mark) = changes.take(subscription)
                }
                continuation.finish()
            } catch {
                continuation.finish(throwing: error)
            }
        }
        continuation.onTermination = { _ in task.cancel() }
        return stream
    }
}

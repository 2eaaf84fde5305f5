import DeltaCore
import DeltaSQLite
import Foundation

/// A live query's result brought up to date with the rows a commit changed, instead of read
/// again: the records of those ids leave the previous result, and those of them the query now
/// matches go back in at their place in its order. After a `put` to a 5,000-record result this
/// reads one record, not 5,000 (docs/BENCHMARKS.md, "The replica: queries in SQL, readers,
/// observation").
///
/// It applies only where the previous result holds every record the query matches (no `offset`;
/// no `limit`, or fewer records than it), so no record outside it can move in; otherwise, and
/// when the changed rows are not known one by one, the query reads its whole result.
/// `ChangeHub.quietMark` and the files' counts of commits (`CommitCount`) make sure the rows read and the rows
/// kept are of one state, whichever process wrote them.
/// `LiveQueryTests` checks patched results against whole reads over random writes.
enum ResultPatch {
    /// Whether `previous`, `query`'s whole result as last read, can be patched.
    static func applies(to query: RecordQuery, previous: [Record]) -> Bool {
        query.offset == 0 && query.limit.map { previous.count < $0 } ?? true
    }

    /// `previous` with the records `ids` brought up to date from `reader` (`records`; nil when
    /// none of them changed what the query returns), and the files' counts of commits in the
    /// state they were read from (`CommitCount`).
    static func patched(_ previous: [Record], _ query: RecordQuery, ids: Set<String>, reader: ReplicaReader) throws -> (
        records: [Record]?, commits: CommitCount.Counts
    ) {
        let after = query.after.map { (values: $0.values, id: $0.id) }
        let matcher = query.filter.map(FilterMatcher.init)
        let (read, commits) = try reader.records(ids, in: query.collection)
        let fresh = read.filter { record in
            guard matcher?.matches(body: record.body) ?? true else { return false }
            return after.map { query.precedes($0, (query.sortValues(of: record.body), record.id)) } ?? true
        }
        // Where each id was, in the previous result. Ids compare by their bytes, as the store's
        // keys do: Swift's `==` would take "é" precomposed and decomposed for one id.
        let keys = Set(ids.map { Array($0.utf8) })
        var positions: [Int] = []
        if query.order.isEmpty {
            for id in ids {
                let index = previous.partitioningIndex { !$0.id.utf8.lexicographicallyPrecedes(id.utf8) }
                if index < previous.count, previous[index].id.hasSameBytes(as: id) { positions.append(index) }
            }
        } else {
            for (index, record) in previous.enumerated() where keys.contains(Array(record.id.utf8)) { positions.append(index) }
        }
        var old: [[UInt8]: Record] = [:]
        for position in positions { old[Array(previous[position].id.utf8)] = previous[position] }
        guard fresh.count != old.count || fresh.contains(where: { record in old[Array(record.id.utf8)].map { $0.body != record.body } ?? true })
        else { return (nil, commits) }
        var result = previous
        for index in positions.sorted(by: >) { result.remove(at: index) }
        for record in fresh {
            let key = (values: query.sortValues(of: record.body), id: record.id)
            let index = result.partitioningIndex { query.precedes(key, (query.sortValues(of: $0.body), $0.id)) }
            result.insert(record, at: index)
        }
        if let limit = query.limit, result.count > limit { result.removeLast(result.count - limit) }
        return (result, commits)
    }
}

extension ReplicaReader {
    /// The visible records among `ids` of `collection` (the app's own version where it has one),
    /// from one consistent read, in no particular order, and the files' counts of commits in
    /// that read (`CommitCount`).
    func records(_ ids: Set<String>, in collection: String) throws -> (records: [Record], commits: CommitCount.Counts) {
        try check(collection)
        return try read { connection in
            try connection.transaction {
                // Read first, both files in one statement: the transaction's view of each begins with it.
                let commits = try CommitCount.read(connection)
                let statement = try connection.statement(Self.visibleRecord)
                defer { statement.reset() }
                var records: [Record] = []
                for id in ids {
                    statement.reset()
                    try statement.bind([.text(collection), .text(id)])
                    if try statement.step(), statement.int64(1) == 0 {
                        records.append(Record(id: id, hidden: false, canonicalBody: statement.bytes(2)))
                    }
                }
                return (records, commits)
            }
        }
    }
}

extension Array {
    /// The first index whose element satisfies `belongs`, in an array where every element that
    /// does comes after every element that does not (a binary search).
    fileprivate func partitioningIndex(where belongs: (Element) -> Bool) -> Int {
        var (low, high) = (0, count)
        while low < high {
            let middle = (low + high) / 2
            if belongs(self[middle]) { high = middle } else { low = middle + 1 }
        }
        return low
    }
}

import DeltaCore
import DeltaSQLite
import Foundation

/// A limited query ordered by an indexed member, answered by walking that member's index in
/// SQL: the rows come in order, and the walk stops soon after `offset + limit` of them match,
/// instead of every match being read, parsed and sorted in Swift.
///
/// SQL orders a member's values by SQLite's rules, not by `JSONOrder`, so the walk goes kind by
/// kind in the query's order (null, booleans, numbers, strings, arrays, objects, then records
/// without the member), each kind one range of the index. Within a kind SQL's order agrees with
/// `JSONOrder`, except where it cannot be exact: numbers SQLite holds as doubles (rounded
/// within a few units in the last place) and arrays and objects (compared as JSON text). So the
/// walk keeps going past the last row it needs while rows still tie with it (equal, or for a
/// double within a relative 1e-12; every row of an array or object range), and the rows it read
/// are sorted exactly in Swift, with the app's pending writes among them. A row that belongs in
/// the answer is therefore never left unread: `ReplicaQueryTests` compares this path with the
/// plain one on random records, orders and filters.
struct IndexedOrder {
    /// One kind of value (or their absence) and the range of the member's index that holds it.
    private struct Range {
        /// The `json_type` names of the kind; nil for records without the member.
        let types: [String]?
        /// The index range, over `expression`, that holds every value of the kind.
        let condition: String
        /// Whether SQL's order within the range follows the values' (false for arrays and objects).
        let ordered: Bool
    }

    private let query: RecordQuery
    private let index: String
    private let expression: String
    private let path: String
    private let need: Int

    /// The walk for `query`, when it has a limit, no cursor, and an index on its first sort key:
    /// a compound index on `(equality's member, sort key)` when the filter requires one value of
    /// that member (`equality`), so the walk reads only that value's rows; else the sort key's own.
    init?(_ query: RecordQuery, indexes: Set<String>, equality: ReplicaReader.IndexedEquality?) {
        guard let first = query.order.first, query.after == nil, let limit = query.limit,
            let expression = try? ReplicaIndex.expression(first.member)
        else { return nil }
        if let equality, equality.bindings.count == 1, indexes.contains(ReplicaIndex.name(query.collection, [equality.member, first.member])) {
            index = ReplicaIndex.name(query.collection, [equality.member, first.member])
        } else if indexes.contains(ReplicaIndex.name(query.collection, first.member)) {
            index = ReplicaIndex.name(query.collection, first.member)
        } else {
            return nil
        }
        self.query = query
        self.expression = expression
        path = "'$.\"\(first.member)\"'"
        let (need, overflow) = query.offset.addingReportingOverflow(limit)
        guard !overflow else { return nil }
        self.need = need
    }

    /// The ranges in the order the first sort key ranks them: by kind (reversed when
    /// descending), records without the member last either way.
    private var ranges: [Range] {
        let e = expression
        let kinds = [
            Range(types: ["null"], condition: "\(e) IS NULL", ordered: true),
            Range(types: ["true", "false"], condition: "\(e) BETWEEN 0 AND 1", ordered: true),
            // Numbers sort before all text in SQLite, and NULL is no match for `<`.
            Range(types: ["integer", "real"], condition: "\(e) < ''", ordered: true),
            // Text sorts before all blobs; arrays and objects are extracted as JSON text.
            Range(types: ["text"], condition: "\(e) >= '' AND \(e) < x''", ordered: true),
            Range(types: ["array"], condition: "\(e) >= '' AND \(e) < x''", ordered: false),
            Range(types: ["object"], condition: "\(e) >= '' AND \(e) < x''", ordered: false),
        ]
        let missing = Range(types: nil, condition: "\(e) IS NULL", ordered: true)
        return (query.order[0].descending ? kinds.reversed() : kinds) + [missing]
    }

    /// Calls `body` with every server row the walk reads (those not replaced by a local version
    /// in `local`, the ids' bytes; matching `filter`), stopping once no later row can belong in the answer.
    /// `equality`: one of the filter's indexed equalities, which every match meets (read in SQL;
    /// when it alone decides the filter, rows need no second check). `bound`: a comparison on the
    /// sort key every match meets, so the walk starts and ends where it does.
    func walk(
        _ connection: Connection, filter matcher: FilterMatcher?, equality: ReplicaReader.IndexedEquality?, range bound: ReplicaReader.IndexedRange?,
        local: Set<[UInt8]>,
        _ body: (String, [UInt8]) throws -> Void
    ) throws {
        var found = 0
        // Each range ranks wholly after the one before, so a range starts only while rows are needed.
        for range in ranges where found < need {
            let kind = range.types.map { "json_type(body, \(path)) IN (\($0.map { "'\($0)'" }.joined(separator: ", ")))" } ?? "json_type(body, \(path)) IS NULL"
            var sql = "SELECT id, body, \(expression) FROM records INDEXED BY \(index) WHERE collection = ? AND \(range.condition) AND \(kind)"
            var bindings: [SQLValue] = [.text(query.collection)]
            if let equality {
                sql += " AND \(equality.condition)"
                bindings += equality.bindings
            }
            if let bound {
                sql += " AND \(bound.condition)"
                bindings += bound.bindings
            }
            if range.ordered { sql += " ORDER BY \(expression)\(query.order[0].descending ? " DESC" : ""), id" }
            let statement = try connection.statement(sql)
            defer { statement.reset() }
            try statement.bind(bindings)
            var last: Key?
            while try statement.step() {
                guard local.isEmpty || !local.contains(statement.bytes(0)) else { continue }
                let key = Key(statement)
                if range.ordered, found >= need, let last,
                    !key.ties(with: last, numbers: range.types?.contains("real") == true, exactOrder: query.order.count == 1)
                {
                    return
                }
                let bytes = statement.bytes(1)
                guard equality?.exact == true || (matcher?.matches(body: bytes) ?? true) else { continue }
                try body(statement.string(0), bytes)
                found += 1
                last = key
            }
        }
    }

    /// A row's value of the first sort key as SQLite holds it.
    private enum Key {
        case null
        case integer(Int64)
        case real(Double)
        case text([UInt8])

        init(_ statement: Statement) {
            switch statement.type(2) {
            case .null: self = .null
            case .integer: self = .integer(statement.int64(2))
            case .real: self = .real(statement.double(2))
            default: self = .text(statement.bytes(2))
            }
        }

        /// Whether a row with this key may still come before the one with `other` in the exact
        /// order, though SQL read it later: ties are settled in Swift. Numbers SQLite holds as
        /// doubles may be a few units in the last place from their exact value, so any number
        /// within a relative 1e-12 ties, even two equal integers (one of equal SQL value read
        /// before may be a double whose exact value is larger). With `exactOrder` (one sort key,
        /// and SQL ordering equal values by id as the query does), equal texts, booleans and
        /// nulls need no second look.
        /// `numbers`: the keys are JSON numbers (booleans too are integers to SQLite, but exact).
        func ties(with other: Key, numbers: Bool, exactOrder: Bool) -> Bool {
            switch (self, other) {
            case (.real, _), (_, .real):
                guard let a = number, let b = other.number else { return false }
                return a == b || abs(a - b) <= max(abs(a), abs(b)) * 1e-12
            case (.integer(let a), .integer(let b)): return a == b && (numbers || !exactOrder)
            // Equal keys may be a value and another's prefix up to a NUL (`ReplicaIndex`): read on.
            case (.text(let a), .text(let b)): return (!exactOrder || Connection.jsonTruncatesAtNUL) && a == b
            case (.null, .null): return !exactOrder
            default: return false
            }
        }

        private var number: Double? {
            switch self {
            case .integer(let value): Double(value)
            case .real(let value): value
            default: nil
            }
        }
    }
}

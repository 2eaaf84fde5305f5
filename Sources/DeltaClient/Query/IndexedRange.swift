import DeltaCore
import DeltaSQLite
import Foundation

extension ReplicaReader {
    /// One of a filter's comparisons (`lt`, `lte`, `gt`, `gte`) with a number or a string, on an
    /// indexed member, as an SQL condition that every record the filter matches meets: the index
    /// then reads only the range, not the collection.
    ///
    /// A filter compares values of one kind (`JSONOrder`), so the condition keeps the kind
    /// (`json_type`) and bounds the index. It only narrows the rows read: each is still checked by
    /// the filter. Strings are bounded exactly (SQLite compares their bytes, as `JSONOrder` does);
    /// numbers by their double widened by a relative 1e-12, inclusive, since SQLite holds them as
    /// doubles a few units in the last place from their exact value.
    struct IndexedRange {
        /// The member compared.
        let member: String
        /// The member's index.
        let index: String
        /// The SQL condition, over `body`.
        let condition: String
        /// Its values.
        let bindings: [SQLValue]

        init?(_ filter: Filter, in collection: String, indexes: Set<String>) {
            for (member, comparison, value) in filter.ranges where indexes.contains(ReplicaIndex.name(collection, member)) {
                guard let expression = try? ReplicaIndex.expression(member) else { continue }
                let below = comparison == .lt || comparison == .lte
                let kind = "json_type(body, '$.\"\(member)\"')"
                switch value {
                case .string(let text):
                    // A bound holding NUL may rank after a key that is its value's prefix (`ReplicaIndex`).
                    if Connection.jsonTruncatesAtNUL && text.utf8.contains(0) { continue }
                    (self.member, index) = (member, ReplicaIndex.name(collection, member))
                    // Text sorts after every number and before every blob in SQLite.
                    condition = "\(kind) = 'text' AND " + (below ? "\(expression) >= '' AND \(expression) <= ?" : "\(expression) >= ? AND \(expression) < x''")
                    bindings = [.text(text)]
                    return
                case .number(let text):
                    guard let number = Double(text) else { continue }
                    (self.member, index) = (member, ReplicaIndex.name(collection, member))
                    let widened = below ? number + abs(number) * 1e-12 + .leastNonzeroMagnitude : number - abs(number) * 1e-12 - .leastNonzeroMagnitude
                    guard widened.isFinite else {
                        condition = "\(kind) IN ('integer', 'real')"
                        bindings = []
                        return
                    }
                    condition =
                        "\(kind) IN ('integer', 'real') AND "
                        + (below ? "\(expression) <= CAST(? AS REAL)" : "\(expression) >= CAST(? AS REAL) AND \(expression) < ''")
                    bindings = [.text("\(widened)")]
                    return
                default: continue
                }
            }
            return nil
        }
    }
}

extension Filter {
    /// The comparisons (`lt`, `lte`, `gt`, `gte`) every match meets: the filter's own, or those of
    /// an `and`.
    var ranges: [(member: String, comparison: Comparison, value: JSONValue)] {
        switch self {
        case .compare(let member, let comparison, let value) where [.lt, .lte, .gt, .gte].contains(comparison): [(member, comparison, value)]
        case .and(let filters): filters.flatMap(\.ranges)
        default: []
        }
    }
}

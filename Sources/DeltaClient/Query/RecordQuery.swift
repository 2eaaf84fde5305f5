import DeltaCore
import Foundation

/// A question to a replica's local records: which collection, which records (`filter`), in what
/// order, and which part of the result (`limit`, `offset`, or the page after a `cursor`).
///
/// Run it with `Replica.query(_:)`, or watch it with `Replica.observe(_:)` and `LiveQuery`.
public struct RecordQuery: Sendable, Equatable {
    /// The collection to read.
    public var collection: String
    /// Which records: the same filter language as selections and rules; all without one.
    public var filter: Filter?
    /// The sort keys, most significant first; records equal on all of them come by id. Without
    /// any, records come by id.
    public var order: [SortKey]
    /// At most this many records.
    public var limit: Int?
    /// Skips this many records of the ordered result first.
    public var offset: Int
    /// Only the records that come after this one in the order (keyset paging): a page boundary
    /// that stays put while records are added or removed before it, unlike `offset`.
    public var after: Cursor?

    /// Creates a query; see the properties.
    public init(_ collection: String, filter: Filter? = nil, order: [SortKey] = [], limit: Int? = nil, offset: Int = 0, after: Cursor? = nil) {
        self.collection = collection
        self.filter = filter
        self.order = order
        self.limit = limit
        self.offset = offset
        self.after = after
    }

    /// Whether the two queries ask the same question: strings (the collection, the sort keys'
    /// members, the filter's values, the cursor's id) compare by their UTF-8 bytes, as the store
    /// compares them, not by Swift's canonical equivalence ("é" precomposed is not "e" and U+0301).
    public static func == (lhs: RecordQuery, rhs: RecordQuery) -> Bool {
        lhs.collection.hasSameBytes(as: rhs.collection) && lhs.filter == rhs.filter && lhs.order == rhs.order && lhs.limit == rhs.limit
            && lhs.offset == rhs.offset && lhs.after == rhs.after
    }

    /// One sort key: a top-level member and its direction. Values of one kind compare by
    /// `JSONOrder`; kinds come in the order null, booleans, numbers, strings, arrays, objects
    /// (reversed by `descending`); records without the member come last either way.
    public struct SortKey: Sendable, Equatable {
        /// The member.
        public var member: String
        /// Largest first.
        public var descending: Bool
        /// Creates a sort key.
        public init(_ member: String, descending: Bool = false) {
            self.member = member
            self.descending = descending
        }
        /// Smallest first.
        public static func ascending(_ member: String) -> SortKey { SortKey(member) }
        /// Largest first.
        public static func descending(_ member: String) -> SortKey { SortKey(member, descending: true) }
        /// Whether the two keys sort alike: members compare by their UTF-8 bytes.
        public static func == (lhs: SortKey, rhs: SortKey) -> Bool { lhs.member.hasSameBytes(as: rhs.member) && lhs.descending == rhs.descending }
    }

    /// Where a page ended: the sort values and the id of its last record.
    public struct Cursor: Sendable, Equatable {
        let values: [JSONValue?]
        let id: String

        /// Whether the two cursors mark the same place: ids compare by their UTF-8 bytes.
        public static func == (lhs: Cursor, rhs: Cursor) -> Bool { lhs.id.hasSameBytes(as: rhs.id) && lhs.values == rhs.values }
    }

    /// The cursor that pages on after `record` (the last record of a page of this query).
    public func cursor(after record: Record) -> Cursor {
        Cursor(values: sortValues(of: record.body), id: record.id)
    }

    /// The record's values for the sort keys (nil where it lacks the member).
    func sortValues(of body: [UInt8]) -> [JSONValue?] {
        guard !order.isEmpty, let value = try? JSONValue(parsing: body) else { return order.map { _ in nil } }
        return order.map { value[$0.member] }
    }

    /// Whether the record with `a` values and id comes before the one with `b`'s in this order.
    func precedes(_ a: (values: [JSONValue?], id: String), _ b: (values: [JSONValue?], id: String)) -> Bool {
        for (index, key) in order.enumerated() {
            let (x, y) = (a.values[index], b.values[index])
            if (x == nil) != (y == nil) { return y == nil }  // missing last, either way
            let order = ReplicaReader.order(x, y)
            if order != .equal { return (order == .less) != key.descending }
        }
        return a.id.utf8.lexicographicallyPrecedes(b.id.utf8)
    }
}

/// A selection's filter: a predicate over a record's top-level members (docs/PROTOCOL.md, "Selections").
///
/// The server uses it to choose what a selection's replica holds, and the replica uses the same
/// code to answer `query`, so both always agree on what matches. The ordering it compares by is
/// `JSONOrder`: numbers by exact decimal value, strings by Unicode code points, `false < true`;
/// values of different kinds are never less or greater than each other, only unequal. A member
/// that is missing matches nothing except `exists: false`.
public indirect enum Filter: Sendable, Equatable {
    /// `{"member": {"eq"|"ne"|"lt"|"lte"|"gt"|"gte": value}}`, value a JSON scalar.
    case compare(member: String, Comparison, JSONValue)
    /// `{"member": {"in": [values]}}`: equal to one of the scalars.
    case oneOf(member: String, [JSONValue])
    /// `{"member": {"exists": true|false}}`: present (with any value, `null` too) or not.
    case exists(member: String, Bool)
    /// `{"member": {"has": value}}`: the member is an array with an element equal to the scalar
    /// `value` (a sharing list: `{"editors": {"has": "ada"}}`).
    case has(member: String, JSONValue)
    /// `{"and": [filters]}`: all of them (an empty list matches everything).
    case and([Filter])
    /// `{"or": [filters]}`: at least one of them (an empty list matches nothing).
    case or([Filter])
    /// `{"not": filter}`: the filter does not match.
    case not(Filter)

    /// The comparison operators, by their wire names.
    public enum Comparison: String, Sendable, CaseIterable {
        /// Equal: same kind and same value.
        case eq
        /// Not equal: present, and not `eq`.
        case ne
        /// Less than, same kind only.
        case lt
        /// Less than or equal, same kind only.
        case lte
        /// Greater than, same kind only.
        case gt
        /// Greater than or equal, same kind only.
        case gte
    }

    /// Whether the two filters are the same: members compare by their UTF-8 bytes, as records'
    /// keys do, and values as `JSONValue` does (by their canonical bytes), not by Swift's
    /// canonical equivalence ("é" precomposed is not "e" and U+0301, and matches other records).
    public static func == (lhs: Filter, rhs: Filter) -> Bool {
        switch (lhs, rhs) {
        case (.compare(let a, let x, let u), .compare(let b, let y, let v)): return a.hasSameBytes(as: b) && x == y && u == v
        case (.oneOf(let a, let u), .oneOf(let b, let v)): return a.hasSameBytes(as: b) && u == v
        case (.exists(let a, let x), .exists(let b, let y)): return a.hasSameBytes(as: b) && x == y
        case (.has(let a, let u), .has(let b, let v)): return a.hasSameBytes(as: b) && u == v
        case (.and(let u), .and(let v)), (.or(let u), .or(let v)): return u == v
        case (.not(let u), .not(let v)): return u == v
        default: return false
        }
    }

    /// Whether `record` (a record's JSON object) matches.
    public func matches(_ record: JSONValue) -> Bool { matches { record[$0] } }

    /// Whether the record with canonical JSON `body` matches (one that does not parse matches
    /// nothing); see `FilterMatcher`, which this makes on every call.
    public func matches(body: some Collection<UInt8>) -> Bool { FilterMatcher(self).matches(body: body) }

    /// The filter as a JSON value, in the wire form; equal filters give equal values.
    public var json: JSONValue {
        func one(_ key: String, _ value: JSONValue) -> JSONValue { .object([JSONMember(key: key, value: value)]) }
        switch self {
        case .compare(let member, let comparison, let value): return one(member, one(comparison.rawValue, value))
        case .oneOf(let member, let values): return one(member, one("in", .array(values)))
        case .exists(let member, let present): return one(member, one("exists", .bool(present)))
        case .has(let member, let value): return one(member, one("has", value))
        case .and(let filters): return one("and", .array(filters.map(\.json)))
        case .or(let filters): return one("or", .array(filters.map(\.json)))
        case .not(let filter): return one("not", filter.json)
        }
    }

    /// The members an equality (`eq` or `in`) in every alternative constrains, with their values:
    /// what an index on one of those members can narrow a scan to. Empty when none does.
    public var equalities: [(member: String, values: [JSONValue])] {
        switch self {
        case .compare(let member, .eq, let value): return [(member, [value])]
        case .oneOf(let member, let values): return [(member, values)]
        case .and(let filters): return filters.flatMap(\.equalities)
        default: return []
        }
    }
}

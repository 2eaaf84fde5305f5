import DeltaCore

/// A rule's filter: the selection filter language (`Filter`) whose values may come from the
/// user's token, `{"$claim": NAME}`, or from the rows of another collection, `{"$rows": …}`
/// (docs/PROTOCOL.md, "Users and rules"). `resolve` turns it into a plain `Filter` for one user
/// at one moment.
public indirect enum RuleFilter: Sendable, Equatable {
    /// `eq`, `ne`, `lt`, `lte`, `gt`, `gte` with a scalar or a claim.
    case compare(member: String, Filter.Comparison, RuleValue)
    /// `in` with a literal list, a claim (an array claim, or a scalar as a list of one) or `$rows`.
    case oneOf(member: String, RuleValue)
    /// `exists`.
    case exists(member: String, Bool)
    /// `has` with a scalar or a claim.
    case has(member: String, RuleValue)
    /// All of them.
    case and([RuleFilter])
    /// At least one of them.
    case or([RuleFilter])
    /// Not this one.
    case not(RuleFilter)

    /// The claims this filter reads, `$rows` filters included.
    public var claims: [String] {
        var names: [String] = []
        func note(_ value: RuleValue) {
            switch value {
            case .claim(let name): if !names.contains(name) { names.append(name) }
            case .rows(let source): for name in source.filter.claims where !names.contains(name) { names.append(name) }
            case .literal: break
            }
        }
        func visit(_ filter: RuleFilter) {
            switch filter {
            case .compare(_, _, let value), .oneOf(_, let value), .has(_, let value): note(value)
            case .exists: break
            case .and(let filters), .or(let filters): filters.forEach(visit)
            case .not(let filter): visit(filter)
            }
        }
        visit(self)
        return names
    }

    /// The `$rows` sources this filter reads, in order of appearance.
    public var sources: [RowsSource] {
        switch self {
        case .compare(_, _, .rows(let source)), .oneOf(_, .rows(let source)), .has(_, .rows(let source)): return [source]
        case .compare, .oneOf, .has, .exists: return []
        case .and(let filters), .or(let filters): return filters.flatMap(\.sources)
        case .not(let filter): return filter.sources
        }
    }

    /// The plain filter for `claims`, with every `$rows` source's values from `rows`; nil when
    /// a claim it reads is missing or of a kind the operator cannot use: such a rule allows nothing.
    public func resolve(_ claims: Claims, rows: (RowsSource) throws -> [JSONValue]) rethrows -> Filter? {
        switch self {
        case .compare(let member, let comparison, let value):
            guard let scalar = try value.scalar(claims, rows: rows) else { return nil }
            return .compare(member: member, comparison, scalar)
        case .has(let member, let value):
            guard let scalar = try value.scalar(claims, rows: rows) else { return nil }
            return .has(member: member, scalar)
        case .oneOf(let member, let value):
            guard let list = try value.list(claims, rows: rows) else { return nil }
            return .oneOf(member: member, list)
        case .exists(let member, let present):
            return .exists(member: member, present)
        case .and(let filters):
            var resolved: [Filter] = []
            for filter in filters {
                guard let one = try filter.resolve(claims, rows: rows) else { return nil }
                resolved.append(one)
            }
            return .and(resolved)
        case .or(let filters):
            var resolved: [Filter] = []
            for filter in filters {
                guard let one = try filter.resolve(claims, rows: rows) else { return nil }
                resolved.append(one)
            }
            return .or(resolved)
        case .not(let filter):
            return try filter.resolve(claims, rows: rows).map { .not($0) }
        }
    }
}

/// A value in a rule's filter.
public enum RuleValue: Sendable, Equatable {
    /// A JSON value written in the rules file (a scalar, or a list for `in`).
    case literal(JSONValue)
    /// `{"$claim": NAME}`: the token's claim.
    case claim(String)
    /// `{"$rows": …}`: the values of a member of another collection's rows.
    case rows(RowsSource)

    /// The scalar this value is for `claims`; nil when it is not one.
    func scalar(_ claims: Claims, rows: (RowsSource) throws -> [JSONValue]) rethrows -> JSONValue? {
        let value: JSONValue?
        switch self {
        case .literal(let literal): value = literal
        case .claim(let name): value = claims[name]
        case .rows: return nil
        }
        switch value {
        case .null?, .bool?, .number?, .string?: return value
        default: return nil
        }
    }

    /// The list of scalars this value is for `claims` (non-scalars dropped); nil when it has none to give.
    func list(_ claims: Claims, rows: (RowsSource) throws -> [JSONValue]) rethrows -> [JSONValue]? {
        let value: JSONValue?
        switch self {
        case .literal(let literal): value = literal
        case .claim(let name): value = claims[name]
        case .rows(let source): value = .array(try rows(source))
        }
        switch value {
        case .array(let items)?:
            return items.filter {
                switch $0 {
                case .null, .bool, .number, .string: true
                default: false
                }
            }
        case .null?, .bool?, .number?, .string?: return [value!]
        default: return nil
        }
    }
}

/// `{"$rows": {"collection": C, "where": FILTER, "member": M}}`: the values of member `M` of the
/// visible rows of `C` that `FILTER` (which may read claims, not other rows) matches.
public struct RowsSource: Sendable, Equatable, Hashable {
    /// The collection read.
    public let collection: CollectionName
    /// Which of its rows count.
    public let filter: RuleFilter
    /// The member whose values are taken.
    public let member: String

    /// Creates a source.
    public init(collection: CollectionName, filter: RuleFilter, member: String) {
        self.collection = collection
        self.filter = filter
        self.member = member
    }

    /// Hashes the collection and member (equal sources hash equally).
    public func hash(into hasher: inout Hasher) {
        hasher.combine(collection.rawValue)
        hasher.combine(member)
    }
}

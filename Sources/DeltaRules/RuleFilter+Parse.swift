import DeltaCore

extension RuleFilter {
    /// Parses a rule's filter; `rows` says whether `$rows` may appear (not inside a `$rows`'s own
    /// `where`: one level deep). Errors carry the JSON Pointer of the place inside `value`.
    public init(json value: JSONValue, allowingRows rows: Bool = true) throws {
        self = try Self.parse(value, rows: rows, depth: 0)
    }

    private static func parse(_ value: JSONValue, rows: Bool, depth: Int) throws -> RuleFilter {
        guard depth <= Filter.Bounds.maximumDepth else {
            throw WireError(.rules, "a filter is nested deeper than \(Filter.Bounds.maximumDepth) levels of and/or/not")
        }
        guard case .object(let members) = value, members.count == 1, let only = members.first else {
            throw WireError(.rules, "each filter is an object with exactly one key", evidence: shown(value))
        }
        do {
            switch only.key {
            case "and", "or":
                guard case .array(let items) = only.value else {
                    throw WireError(.rules, "\"\(only.key)\" takes an array of filters", evidence: shown(only.value))
                }
                var filters: [RuleFilter] = []
                for (index, item) in items.enumerated() {
                    do { filters.append(try parse(item, rows: rows, depth: depth + 1)) } catch let error as WireError { throw error.within(String(index)) }
                }
                return only.key == "and" ? .and(filters) : .or(filters)
            case "not":
                return .not(try parse(only.value, rows: rows, depth: depth + 1))
            default:
                return try condition(member: only.key, only.value, rows: rows)
            }
        } catch let error as WireError {
            throw error.within(only.key)
        }
    }

    private static func condition(member: String, _ value: JSONValue, rows: Bool) throws -> RuleFilter {
        guard !member.isEmpty else { throw WireError(.rules, "a member name is empty") }
        guard case .object(let operators) = value, operators.count == 1, let op = operators.first else {
            throw WireError(
                .rules, "a condition on \"\(member)\" is an object with exactly one operator (eq, ne, lt, lte, gt, gte, in, exists, has)",
                evidence: shown(value))
        }
        do {
            if let comparison = Filter.Comparison(rawValue: op.key) {
                return .compare(member: member, comparison, try operand(op.value, list: false, rows: false))
            }
            switch op.key {
            case "in": return .oneOf(member: member, try operand(op.value, list: true, rows: rows))
            case "has": return .has(member: member, try operand(op.value, list: false, rows: false))
            case "exists":
                guard case .bool(let present) = op.value else { throw WireError(.rules, "\"exists\" takes true or false", evidence: shown(op.value)) }
                return .exists(member: member, present)
            default:
                throw WireError(
                    .rules, "unknown operator (use eq, ne, lt, lte, gt, gte, in, exists, has)", evidence: String(reflecting: String(op.key.prefix(40))))
            }
        } catch let error as WireError {
            throw error.within(op.key)
        }
    }

    /// A literal (a scalar, or for `in` an array of scalars), `{"$claim": NAME}`, or, for `in`, `{"$rows": …}`.
    private static func operand(_ value: JSONValue, list: Bool, rows: Bool) throws -> RuleValue {
        switch value {
        case .object(let members) where members.count == 1 && members[0].key == "$claim":
            guard case .string(let name) = members[0].value, !name.isEmpty else {
                throw WireError(.rules, "\"$claim\" names a claim with a non-empty string", evidence: shown(members[0].value)).within("$claim")
            }
            return .claim(name)
        case .object(let members) where members.count == 1 && members[0].key == "$rows":
            guard list else { throw WireError(.rules, "\"$rows\" gives a list of values: use it with \"in\"") }
            guard rows else { throw WireError(.rules, "\"$rows\" may not appear inside another \"$rows\" (one level deep)") }
            do { return .rows(try rowsSource(members[0].value)) } catch let error as WireError { throw error.within("$rows") }
        case .object:
            throw WireError(.rules, "a value is a JSON scalar, {\"$claim\": NAME} or, with \"in\", {\"$rows\": {…}}", evidence: shown(value))
        case .array(let items):
            guard list else { throw WireError(.rules, "compares with a scalar or {\"$claim\": NAME}", evidence: shown(value)) }
            for (index, item) in items.enumerated() {
                switch item {
                case .null, .bool, .number, .string: continue
                default: throw WireError(.rules, "\"in\" lists scalars only", evidence: shown(item)).within(String(index))
                }
            }
            return .literal(value)
        case .null, .bool, .number, .string:
            guard !list else { throw WireError(.rules, "\"in\" takes an array, {\"$claim\": NAME} or {\"$rows\": {…}}", evidence: shown(value)) }
            return .literal(value)
        }
    }

    private static func rowsSource(_ value: JSONValue) throws -> RowsSource {
        guard case .object(let members) = value else {
            throw WireError(.rules, "\"$rows\" takes {\"collection\", \"where\", \"member\"}", evidence: shown(value))
        }
        let keys = Set(members.map(\.key))
        guard keys == ["collection", "where", "member"] else {
            throw WireError(.rules, "\"$rows\" takes exactly \"collection\", \"where\" and \"member\"", evidence: keys.sorted().joined(separator: ","))
        }
        guard case .string(let name)? = value["collection"], let collection = try? CollectionName(name) else {
            throw WireError(.rules, "not a collection name", evidence: shown(value["collection"] ?? .null)).within("collection")
        }
        guard case .string(let member)? = value["member"], !member.isEmpty else {
            throw WireError(.rules, "names a member with a non-empty string", evidence: shown(value["member"] ?? .null)).within("member")
        }
        let filter: RuleFilter
        do { filter = try RuleFilter(json: value["where"] ?? .null, allowingRows: false) } catch let error as WireError { throw error.within("where") }
        return RowsSource(collection: collection, filter: filter, member: member)
    }

    static func shown(_ value: JSONValue) -> String { String(decoding: value.canonicalBytes.prefix(80), as: UTF8.self) }
}

extension RowsSource {
    /// The values of `member` over the rows (canonical bodies) that `filter` matches for `claims`:
    /// scalars as they are, arrays as their scalar elements; each once, in canonical order.
    /// None when the filter reads a claim `claims` lacks (then the source gives nothing).
    public func values(_ bodies: some Sequence<[UInt8]>, claims: Claims) -> [JSONValue] {
        var collector = Collector(self, claims: claims)
        for body in bodies { body.withUnsafeBytes { collector.add($0) } }
        return collector.values
    }

    /// `values(_:claims:)` over rows offered one at a time, as a store reads them: only the
    /// values are kept, so a source collection of any size is read in bounded memory.
    public struct Collector {
        private let matcher: FilterMatcher?
        private let member: String
        private var seen: [[UInt8]: JSONValue] = [:]

        /// Collects `source`'s values for `claims`.
        public init(_ source: RowsSource, claims: Claims) {
            matcher = source.filter.resolve(claims, rows: { _ in [] }).map(FilterMatcher.init)
            member = source.member
        }

        /// Takes one row's canonical body (read during the call only).
        public mutating func add(_ body: UnsafeRawBufferPointer) {
            guard let matcher, matcher.matches(bytes: body), let record = try? JSONValue(parsing: body), let value = record[member] else { return }
            let found: [JSONValue]
            if case .array(let items) = value { found = items } else { found = [value] }
            for item in found {
                switch item {
                case .null, .bool, .number, .string: seen[item.canonicalBytes] = item
                default: continue
                }
            }
        }

        /// The values taken, each once, in canonical order.
        public var values: [JSONValue] { seen.keys.sorted { $0.lexicographicallyPrecedes($1) }.map { seen[$0]! } }
    }
}

extension Filter {
    /// The bounds a filter must stay within, so that a hostile one cannot cost unbounded work.
    public enum Bounds {
        /// Longest filter text accepted, in UTF-8 bytes.
        public static let maximumBytes = 4096
        /// Deepest nesting of `and`, `or` and `not`.
        public static let maximumDepth = 8
        /// Most conditions (comparisons, `in`, `exists`) in one filter.
        public static let maximumConditions = 64
        /// Most values in one `in` list.
        public static let maximumValues = 256
    }

    /// Parses a filter from its JSON text (the value of the `filter` query parameter).
    public init(parsing text: some Collection<UInt8>) throws {
        guard text.count <= Bounds.maximumBytes else {
            throw WireError(.filter, "longer than \(Bounds.maximumBytes) bytes", evidence: "\(text.count) bytes")
        }
        let value: JSONValue
        do {
            value = try JSONValue(parsing: text, limits: JSONLimits(maximumDepth: 2 * Bounds.maximumDepth + 4, maximumStringBytes: Bounds.maximumBytes))
        } catch let error as WireError {
            throw WireError(.filter, "not valid JSON", evidence: error.description)
        }
        try self.init(json: value)
    }

    /// Parses a filter from its JSON value (the rules file's filters, once their values are filled in).
    public init(json value: JSONValue) throws {
        var conditions = 0
        self = try Filter.parse(value, depth: 0, conditions: &conditions)
    }

    /// Parses a filter from its JSON text.
    public init(parsing text: String) throws {
        try self.init(parsing: Array(text.utf8))
    }

    private static func parse(_ value: JSONValue, depth: Int, conditions: inout Int) throws -> Filter {
        guard depth <= Bounds.maximumDepth else {
            throw WireError(.filter, "nested deeper than \(Bounds.maximumDepth) levels of and/or/not")
        }
        guard case .object(let members) = value, members.count == 1, let only = members.first else {
            throw WireError(
                .filter, "each filter is an object with exactly one key", evidence: String(decoding: value.canonicalBytes.prefix(100), as: UTF8.self))
        }
        switch only.key {
        case "and", "or":
            guard case .array(let items) = only.value else {
                throw WireError(.filter, "\"\(only.key)\" takes an array of filters", evidence: kind(only.value))
            }
            let filters = try items.map { try parse($0, depth: depth + 1, conditions: &conditions) }
            return only.key == "and" ? .and(filters) : .or(filters)
        case "not":
            return .not(try parse(only.value, depth: depth + 1, conditions: &conditions))
        default:
            conditions += 1
            guard conditions <= Bounds.maximumConditions else {
                throw WireError(.filter, "more than \(Bounds.maximumConditions) conditions")
            }
            return try condition(member: only.key, only.value)
        }
    }

    private static func condition(member: String, _ value: JSONValue) throws -> Filter {
        guard !member.isEmpty else { throw WireError(.filter, "a member name is empty") }
        guard case .object(let operators) = value, operators.count == 1, let op = operators.first else {
            throw WireError(
                .filter, "a condition on \"\(member)\" is an object with exactly one operator (eq, ne, lt, lte, gt, gte, in, exists, has)",
                evidence: String(decoding: value.canonicalBytes.prefix(100), as: UTF8.self))
        }
        if let comparison = Comparison(rawValue: op.key) {
            return .compare(member: member, comparison, try scalar(op.value, member: member, op: op.key))
        }
        switch op.key {
        case "in":
            guard case .array(let values) = op.value else {
                throw WireError(.filter, "\"in\" on \"\(member)\" takes an array of scalars", evidence: kind(op.value))
            }
            guard values.count <= Bounds.maximumValues else {
                throw WireError(.filter, "\"in\" on \"\(member)\" has more than \(Bounds.maximumValues) values", evidence: "\(values.count)")
            }
            return .oneOf(member: member, try values.map { try scalar($0, member: member, op: "in") })
        case "has":
            return .has(member: member, try scalar(op.value, member: member, op: "has"))
        case "exists":
            guard case .bool(let present) = op.value else {
                throw WireError(.filter, "\"exists\" on \"\(member)\" takes true or false", evidence: kind(op.value))
            }
            return .exists(member: member, present)
        default:
            throw WireError(
                .filter, "unknown operator on \"\(member)\" (use eq, ne, lt, lte, gt, gte, in, exists, has)",
                evidence: String(reflecting: String(op.key.prefix(40)))
            )
        }
    }

    private static func scalar(_ value: JSONValue, member: String, op: String) throws -> JSONValue {
        switch value {
        case .null, .bool, .number, .string: return value
        case .array, .object:
            throw WireError(.filter, "\"\(op)\" on \"\(member)\" compares with scalars only (null, true, false, numbers, strings)", evidence: kind(value))
        }
    }

    private static func kind(_ value: JSONValue) -> String {
        switch value {
        case .null: "found null"
        case .bool: "found a boolean"
        case .number: "found a number"
        case .string: "found a string"
        case .array: "found an array"
        case .object: "found an object"
        }
    }
}

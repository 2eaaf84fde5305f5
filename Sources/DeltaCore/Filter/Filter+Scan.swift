extension Filter {
    /// The top-level members the filter reads, each once.
    public var members: [String] {
        var found: [String] = []
        func visit(_ filter: Filter) {
            switch filter {
            case .compare(let member, _, _), .oneOf(let member, _), .exists(let member, _), .has(let member, _):
                if !found.contains(where: { $0.utf8.elementsEqual(member.utf8) }) { found.append(member) }
            case .and(let filters), .or(let filters): filters.forEach(visit)
            case .not(let filter): visit(filter)
            }
        }
        visit(self)
        return found
    }

    /// Whether the record whose member `member` is `lookup(member)` (nil: missing) matches.
    func matches(lookup: (String) -> JSONValue?) -> Bool {
        switch self {
        case .compare(let member, let comparison, let value):
            guard let found = lookup(member) else { return false }
            let order = JSONOrder.compare(found, value)
            switch comparison {
            case .eq: return order == .equal
            case .ne: return order != .equal
            case .lt: return order == .less
            case .lte: return order == .less || order == .equal
            case .gt: return order == .greater
            case .gte: return order == .greater || order == .equal
            }
        case .oneOf(let member, let values):
            guard let found = lookup(member) else { return false }
            return values.contains { JSONOrder.compare(found, $0) == .equal }
        case .exists(let member, let present):
            return (lookup(member) != nil) == present
        case .has(let member, let value):
            guard case .array(let elements) = lookup(member) else { return false }
            return elements.contains { JSONOrder.compare($0, value) == .equal }
        case .and(let filters): return filters.allSatisfy { $0.matches(lookup: lookup) }
        case .or(let filters): return filters.contains { $0.matches(lookup: lookup) }
        case .not(let filter): return !filter.matches(lookup: lookup)
        }
    }
}

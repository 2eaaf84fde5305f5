import DeltaCore

extension Filter {
    /// Which clause decided whether `record` matches, for people (`deltasnap rules explain`): the
    /// JSON Pointer of the deciding condition inside the filter's JSON and that condition, e.g.
    /// `/or/1 {"editors":{"has":"ada"}}`. For `and`, the first clause that fails (or the whole
    /// `and` when all hold); for `or`, the first that holds (or the whole `or` when none does).
    public func explain(_ record: JSONValue) -> String {
        func shown(_ filter: Filter) -> String { String(decoding: filter.json.canonicalBytes.prefix(200), as: UTF8.self) }
        func visit(_ filter: Filter, _ path: String) -> String {
            switch filter {
            case .and(let filters):
                if let index = filters.firstIndex(where: { !$0.matches(record) }) { return visit(filters[index], "\(path)/and/\(index)") }
                return "\(path.isEmpty ? "/" : path) \(shown(filter))"
            case .or(let filters):
                if let index = filters.firstIndex(where: { $0.matches(record) }) { return visit(filters[index], "\(path)/or/\(index)") }
                return "\(path.isEmpty ? "/" : path) \(shown(filter))"
            case .not(let inner):
                return visit(inner, "\(path)/not")
            default:
                return "\(path.isEmpty ? "/" : path) \(shown(filter))"
            }
        }
        return visit(self, "")
    }
}

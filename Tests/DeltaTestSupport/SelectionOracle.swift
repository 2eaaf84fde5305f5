public import DeltaCore

extension Selection {
    /// What a replica of this selection must hold when the collection's visible records are
    /// `records` (id → canonical JSON): the matching ones, and of those the first `limit` by id.
    /// The tests' oracle; it shares only `Filter` with the code under test.
    public func expectedState(of records: [String: String]) throws -> [String: String] {
        var matching = try records.filter { matches(try JSONValue(parsing: Array($0.value.utf8))) }
        if let limit {
            let kept = Set(matching.keys.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }.prefix(limit))
            matching = matching.filter { kept.contains($0.key) }
        }
        return matching
    }
}

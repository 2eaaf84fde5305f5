import DeltaCore
import DeltaRules
import DeltaStore

extension RecordRoute {
    /// Record `id` when `claims`' read rule `filter` gives it to them: visible, and matching the
    /// rule resolved in one read transaction; nil otherwise (the caller answers `404` either way).
    /// The version returned is the one that transaction saw (read again for its `ETag`, and
    /// refused if it changed in between).
    func readable(_ id: String, in collection: CollectionName, under filter: RuleFilter, for claims: Claims) async throws -> StoredRecord? {
        guard let rules = configuration.rules else { return nil }
        let (start, _) = try await store.openRuleRead(collection, since: .nothing, client: nil)
        guard case .source(let source, _) = start else { return nil }
        defer { source.close() }
        try rules.check(source)
        let rule = try await source.resolve(filter, for: claims)
        guard let row = try await source.visible(downFrom: id, inclusive: true, maximum: 1).first, row.id.utf8.elementsEqual(id.utf8),
            FilterMatcher(rule).matches(body: row.body)
        else { return nil }
        guard let stored = try await store.record(id, in: collection), !stored.record.hidden, stored.record.body == row.body else { return nil }
        return stored
    }
}

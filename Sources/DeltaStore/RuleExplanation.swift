public import DeltaCore
public import DeltaRules

/// What rules let one user do with one record, and which clause decided each answer, read from
/// the store as it is now: `deltasnap rules explain` and the console's Users page.
public struct RuleExplanation: Sendable, Equatable {
    /// One operation's answer.
    public struct Line: Sendable, Equatable {
        /// `read`, `create`, `update` or `delete`.
        public let operation: String
        /// Allowed, denied, or nil when the new record's content decides (a write).
        public let allowed: Bool?
        /// The rule and clause that decided, as a sentence's end: `allowed (read: true)`.
        public let reason: String
    }

    /// `stored`, `hidden (a tombstone)` or `not stored`.
    public let state: String
    /// Read, then create or update (whichever a write would be), then delete.
    public let lines: [Line]

    /// The explanation for `claims` and record `id` of `collection`, under `rules`; nil when the
    /// rules do not name the collection (the owner's alone).
    public static func explain(_ rules: Rules, claims: Claims, collection: CollectionName, id: String, store: any ChangeReader) async throws
        -> RuleExplanation?
    {
        guard let rule = rules.rule(for: collection) else { return nil }
        let stored = try await store.record(id, in: collection)
        var rows: [RowsSource: [JSONValue]] = [:]
        for source in rule.sources where rows[source] == nil {
            rows[source] = try await values(store, source, claims)
        }
        let record = try stored.map { try JSONValue(parsing: $0.record.body) }
        let state = stored.map { $0.record.hidden ? "hidden (a tombstone)" : "stored" } ?? "not stored"
        var lines = [line("read", rule.read, "read", record: stored?.record.hidden == false ? record : nil, claims, rows)]
        // A hidden record is held: a `put` over it is an update, decided over its stored content.
        let (update, updateRule) = rule.access(for: stored == nil ? .create : .update)
        lines.append(line(stored == nil ? "create" : "update", update, updateRule, record: record, claims, rows, absentAllowed: true))
        let (delete, deleteRule) = rule.access(for: .delete)
        lines.append(line("delete", delete, deleteRule, record: record, claims, rows, absentAllowed: true))
        return RuleExplanation(state: state, lines: lines)
    }

    /// One operation: allowed or denied, and the rule and clause that decided.
    private static func line(
        _ operation: String, _ access: CollectionRule.Access, _ name: String, record: JSONValue?, _ claims: Claims, _ rows: [RowsSource: [JSONValue]],
        absentAllowed: Bool = false
    ) -> Line {
        switch access {
        case .everyone: return Line(operation: operation, allowed: true, reason: "allowed (\(name): true)")
        case .nobody: return Line(operation: operation, allowed: false, reason: "denied (\(name): false, or not given)")
        case .when(let filter):
            guard let resolved = filter.resolve(claims, rows: { rows[$0] ?? [] }) else {
                return Line(
                    operation: operation, allowed: false,
                    reason: "denied (\(name): reads a claim these claims lack or cannot use: \(filter.claims.joined(separator: ", ")))")
            }
            guard let record else {
                return absentAllowed
                    ? Line(operation: operation, allowed: nil, reason: "as the new record's content decides (\(name))")
                    : Line(operation: operation, allowed: false, reason: "denied (no visible record)")
            }
            let allowed = resolved.matches(record)
            return Line(operation: operation, allowed: allowed, reason: "\(allowed ? "allowed" : "denied") (\(name) \(resolved.explain(record)))")
        }
    }

    /// `source`'s values for `claims`, its collection read in batches (only the values kept).
    private static func values(_ store: any ChangeReader, _ source: RowsSource, _ claims: Claims) async throws -> [JSONValue] {
        let read = try await store.openFullRead([source.collection])
        defer { read.close() }
        var collector = RowsSource.Collector(source, claims: claims)
        while let batch = try await read.next(source.collection, maximumBytes: 1 << 16) {
            batch.forEach { body, _ in body.withUnsafeBytes { collector.add($0) } }
        }
        return collector.values
    }
}

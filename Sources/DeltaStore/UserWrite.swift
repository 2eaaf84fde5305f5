public import DeltaCore
public import DeltaRules

/// A user's write under rules (docs/PROTOCOL.md, "Users and rules"), decided inside the write
/// transaction that applies it, so no other write can slip between the check and the write.
///
/// The rule for the operation (`create`, `update`, `delete`, else `write`) must hold for the
/// stored record, when there is one (hidden or not), and for the record a `put` writes, after
/// the `stamp` members are set from the token: a user can neither touch another user's row nor
/// hand their own to someone else. `create` decides only an id the collection does not hold: a
/// `put` over a hidden record is an `update`, so nobody restores or takes over a row that was
/// someone else's. A collection the rules do not name is the owner's alone.
public struct UserWrite: Sendable {
    /// The user's verified claims.
    public let claims: Claims
    /// The rules the server holds.
    public let rules: Rules
    /// Their version: a write is refused (`StoreError.Kind.rulesMismatch`) when the database
    /// holds another one, so instances started with different rules never apply both.
    public let rulesVersion: UInt64

    /// Creates one.
    public init(claims: Claims, rules: Rules, rulesVersion: UInt64) {
        self.claims = claims
        self.rules = rules
        self.rulesVersion = rulesVersion
    }

    /// What one write transaction learned while deciding users' writes: the `$rows` values the
    /// rules read, once each, and whether the database's rules version was checked.
    public struct Context: Sendable {
        var rows: [RowsSource: [JSONValue]] = [:]
        var checkedVersion = false

        /// An empty one, for a new transaction.
        public init() {}
    }

    /// What may happen. `visible` is what the writer may read of the stored record, the only
    /// thing of it an answer may show: all of it, a bare tombstone (`{"hidden":true,"id":…}`)
    /// for a hidden record whose content the user's read rule matches, or nil.
    public enum Verdict: Sendable, Equatable {
        /// Write this (for a `put`, the record with its stamps; nil for a `delete`).
        case allowed(Record?, visible: Record?)
        /// Not written: `rule` refused it.
        case denied(rule: String, visible: Record?)
    }

    /// `rulesMismatch` unless the database holds the rules this write is decided under; read once
    /// per transaction (`context`). Every answer to a user's write, a denial too, is decided
    /// only under the database's rules: an answer is recorded for good.
    public func checkVersion(in ledger: any PushLedger, context: inout Context) async throws {
        guard !context.checkedVersion else { return }
        let held = try await ledger.rulesVersion()
        guard held == rulesVersion else {
            throw StoreError(
                .rulesMismatch, "rules", "this server holds version \(rulesVersion) but the database holds version \(held)",
                evidence: "the rules changed after this request began (deltasnap rules install, or an instance started with another rules file)")
        }
        context.checkedVersion = true
    }

    /// Decides a `put` of `record` (nil: a `delete`) over `stored` in `collection`; the rules
    /// version and the `$rows` values are read through `ledger` once per transaction (`context`).
    public func decide(
        _ collection: CollectionName, put record: Record?, stored: Record?, in ledger: any PushLedger, context: inout Context
    ) async throws -> Verdict {
        try await checkVersion(in: ledger, context: &context)
        guard let rule = rules.rule(for: collection) else { return .denied(rule: "write", visible: nil) }
        for source in rule.sources where context.rows[source] == nil {
            var collector = RowsSource.Collector(source, claims: claims)
            try await ledger.forEachBody(of: source.collection, key: source.key(for: claims)) { collector.add($0) }
            context.rows[source] = collector.values
        }
        let known = context.rows
        let lookup: (RowsSource) -> [JSONValue] = { known[$0] ?? [] }
        let storedValue = try stored.map { try JSONValue(parsing: $0.body) }
        // A public collection's records are everyone's to read, hidden ones too (as `GET` gives
        // them); under a read rule, a hidden record's content never is, only that it is hidden.
        let visible = stored.flatMap { record -> Record? in
            guard let value = storedValue else { return nil }
            switch rule.read {
            case .everyone: return record
            case .nobody: return nil
            case .when(let filter):
                guard filter.resolve(claims, rows: lookup)?.matches(value) == true else { return nil }
                return record.hidden ? Record(id: record.id, hidden: true, canonicalBody: Record.bareBody(id: record.id)) : record
            }
        }
        let operation: WriteOperation = record == nil ? .delete : stored == nil ? .create : .update
        var proposed: Record?
        var proposedValue: JSONValue?
        if let record {
            guard let stamped = rule.stamping(try JSONValue(parsing: record.body), claims: claims) else {
                return .denied(rule: rule.access(for: operation).rule, visible: visible)
            }
            proposed = try Record(value: stamped)
            proposedValue = stamped
        }
        let (allowed, decided) = rule.allows(operation, stored: storedValue, proposed: proposedValue, claims: claims, rows: lookup)
        return allowed ? .allowed(proposed, visible: visible) : .denied(rule: decided, visible: visible)
    }
}

import DeltaCore

extension CollectionRule {
    /// Whether the user with `claims` may make a write, and which rule decided: the rule for
    /// `operation` must hold for the `stored` record (when there is one, hidden or not) and for
    /// the `proposed` one (a `put`'s record, stamps applied). `rows` gives a `$rows` source's values.
    public func allows(
        _ operation: WriteOperation, stored: JSONValue?, proposed: JSONValue?, claims: Claims, rows: (RowsSource) throws -> [JSONValue]
    ) rethrows -> (allowed: Bool, rule: String) {
        let (access, rule) = access(for: operation)
        switch access {
        case .everyone: return (true, rule)
        case .nobody: return (false, rule)
        case .when(let filter):
            guard let resolved = try filter.resolve(claims, rows: rows) else { return (false, rule) }
            let allowed = [stored, proposed].allSatisfy { record in record.map(resolved.matches) ?? true }
            return (allowed, rule)
        }
    }

    /// `record` with every stamped member set from `claims`, whatever it held; nil when a claim
    /// a stamp names is missing (such a write is refused).
    public func stamping(_ record: JSONValue, claims: Claims) -> JSONValue? {
        guard !stamp.isEmpty else { return record }
        guard case .object(var members) = record else { return nil }
        for (member, claim) in stamp {
            guard let value = claims[claim] else { return nil }
            members.removeAll { $0.key.utf8.elementsEqual(member.utf8) }
            members.append(JSONMember(key: member, value: value))
        }
        members.sort { $0.key.utf8.lexicographicallyPrecedes($1.key.utf8) }
        return .object(members)
    }
}

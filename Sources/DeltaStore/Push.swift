public import DeltaCore

/// Applies one client's push to a store: each mutation exactly once, in order, with conflicts
/// reported instead of overwriting the server's copy (docs/PROTOCOL.md, "Writes from apps").
///
/// Consecutive mutations on one collection share one write transaction (one commit), split where
/// a record would be written twice. Each transaction reads and advances the client's last
/// mutation id itself, so two pushes of the same client racing through two server instances
/// still apply each mutation once: the second finds them recorded and answers from the record.
public enum Push {
    /// Applies `request` to `store`: one result per mutation, and the client's last mutation id.
    public static func apply(_ request: PushRequest, to store: any ChangeStore) async throws -> PushResponse {
        var results: [MutationResult] = []
        var last: UInt64 = 0
        var first = true
        for group in groups(request.mutations) {
            let forgetBefore = first ? group[group.startIndex].id : nil
            first = false
            let (value, _) = try await store.write(to: group[group.startIndex].collection) { transaction in
                guard let ledger = transaction as? any PushLedger else {
                    throw StoreError(.unavailable, "store", "this backend cannot take pushes")
                }
                if let forgetBefore { try await ledger.forget(client: request.client, before: forgetBefore) }
                var answered: [MutationResult] = []
                let recorded = try await ledger.lastMutation(client: request.client)
                var last = recorded
                for mutation in group {
                    answered.append(try await apply(mutation, client: request.client, last: &last, transaction, ledger))
                }
                if last > recorded { try await ledger.setLastMutation(client: request.client, last) }
                return (answered, last)
            }
            results.append(contentsOf: value.0)
            last = value.1
        }
        return PushResponse(lastMutationID: last, results: results)
    }

    /// Runs of mutations on one collection in which no record id repeats: one commit each.
    public static func groups(_ mutations: [Mutation]) -> [ArraySlice<Mutation>] {
        var groups: [ArraySlice<Mutation>] = []
        var start = mutations.startIndex
        var ids: Set<String> = []
        for index in mutations.indices {
            let mutation = mutations[index]
            if index > start, mutation.collection != mutations[start].collection || ids.contains(mutation.recordID) {
                groups.append(mutations[start..<index])
                start = index
                ids = []
            }
            ids.insert(mutation.recordID)
        }
        if start < mutations.endIndex { groups.append(mutations[start...]) }
        return groups
    }

    /// One mutation: a repeat gets its recorded answer, the next one is decided and recorded.
    private static func apply(
        _ mutation: Mutation, client: String, last: inout UInt64, _ transaction: any WriteTransaction, _ ledger: any PushLedger
    ) async throws -> MutationResult {
        let digest = mutation.digest
        if mutation.id <= last {
            guard let (recordedDigest, result) = try await ledger.recorded(client: client, mutation: mutation.id) else {
                throw sequenceError(mutation, client, "was acknowledged before and is no longer kept", last: last)
            }
            guard constantTimeEqual(recordedDigest, digest) else {
                throw sequenceError(mutation, client, "reuses an id with a different payload", last: last)
            }
            return try MutationResult(value: JSONValue(parsing: result))
        }
        guard mutation.id == last + 1 else {
            throw sequenceError(mutation, client, "leaves a gap: the next id must be \(last + 1)", last: last)
        }
        let result = try await decide(mutation, client: client, transaction, ledger)
        try await ledger.record(
            client: client, mutation: mutation.id, digest: digest, result: result.json.canonicalBytes,
            wrote: result.status == .applied ? mutation.recordID : nil)
        last = mutation.id
        return result
    }

    /// A push whose ids do not continue the client's sequence, with the last id recorded.
    private static func sequenceError(_ mutation: Mutation, _ client: String, _ why: String, last: UInt64) -> StoreError {
        var error = StoreError(.mutationSequence, "mutation \(mutation.id) of client \(String(reflecting: client))", why, evidence: "last mutation \(last)")
        error.lastMutation = last
        return error
    }

    /// Decides and, when it applies, writes one new mutation.
    private static func decide(_ mutation: Mutation, client: String, _ transaction: any WriteTransaction, _ ledger: any PushLedger) async throws -> MutationResult {
        if let problem = mutation.problem { return MutationResult(id: mutation.id, status: .invalid, reason: problem) }
        let current = try await ledger.stored(mutation.recordID)
        let wantsHidden = mutation.operation == .delete
        guard let current else {
            if mutation.operation == .delete { return MutationResult(id: mutation.id, status: .unchanged) }
            try await transaction.upsert(mutation.record!)
            return MutationResult(id: mutation.id, status: .applied)
        }
        if current.record.hidden == wantsHidden && (wantsHidden || current.record.body == mutation.record?.body) {
            return MutationResult(id: mutation.id, status: .unchanged)
        }
        if let reason = try await conflict(mutation, current, client: client, ledger) {
            return MutationResult(id: mutation.id, status: .conflict, reason: reason.rawValue, server: current.record, base: current.token.entityTag)
        }
        switch mutation.operation {
        case .put: try await transaction.upsert(mutation.record!)
        case .delete: try await transaction.hide(id: mutation.recordID)
        }
        return MutationResult(id: mutation.id, status: .applied)
    }

    /// Why writing over `current` would overwrite a change the app has not seen, or nil.
    ///
    /// A version written by this client's own earlier push was seen: the app made this mutation
    /// on top of its own edit. Otherwise the version was seen when its position is not after the base.
    private static func conflict(_ mutation: Mutation, _ current: StoredRecord, client: String, _ ledger: any PushLedger) async throws -> MutationResult.ConflictReason? {
        if current.writer == client { return nil }
        if mutation.create && !current.record.hidden { return .exists }
        guard let text = mutation.base, let base = try? Token(entityTag: text) else {
            return current.record.hidden ? .hidden : .changed
        }
        guard try await ledger.holds(base) else { return .unknownBase }
        if current.token.position <= base.position { return nil }
        return current.record.hidden ? .hidden : .changed
    }
}

import DeltaCore

/// Applies one client's push to a store: each mutation exactly once, in order, with conflicts
/// reported instead of overwriting the server's copy (docs/PROTOCOL.md, "Writes from apps").
///
/// Consecutive mutations on one collection share one write transaction (one commit), split where
/// a record would be written twice. Each transaction reads and advances the client's last
/// mutation id itself, so two pushes of the same client racing through two server instances
/// still apply each mutation once: the second finds them recorded and answers from the record.
package enum Push {
    /// Applies `request` to `store` for `principal`: one result per mutation, and the client's
    /// last mutation id.
    ///
    /// A user's mutations are checked against the rules in their transaction (`UserWrite`), and a
    /// refused one answers `denied`. Every answer shows only what `principal` may read: a
    /// mutation that would be a conflict over a record it may not read answers `denied` with
    /// rule `read`, whatever the record holds. The client id belongs to the principal that first
    /// pushed with it (the owner, the client key, or one user): any other's push with it is
    /// `clientOwned` and applies nothing, so recorded answers are replayed only to their principal.
    package static func apply(_ request: PushRequest, to store: any ChangeReader & ChangeWriter, as principal: Principal = .owner) async throws -> PushResponse
    {
        var results: [MutationResult] = []
        var last: UInt64 = 0
        var first = true
        for group in groups(request.mutations) {
            let forgetBefore = first ? group[group.startIndex].id : nil
            first = false
            let (value, _) = try await store.write(to: group[group.startIndex].collection) { transaction in
                if let forgetBefore {
                    try await checkOwner(request.client, principal, transaction)
                    try await transaction.forget(client: request.client, before: forgetBefore)
                }
                var run = Run(client: request.client, last: try await transaction.lastMutation(client: request.client), principal: principal)
                let recorded = run.last
                var answered: [MutationResult] = []
                for mutation in group { answered.append(try await apply(mutation, &run, transaction)) }
                if run.last > recorded {
                    try await transaction.record(
                        client: request.client, RecordedRun(first: recorded + 1, digests: run.digests, results: run.results + [UInt8(ascii: "]")]))
                }
                return (answered, run.last)
            }
            results.append(contentsOf: value.0)
            last = value.1
        }
        return PushResponse(lastMutationID: last, results: results)
    }

    /// Runs of mutations on one collection in which no record id repeats: one commit each.
    package static func groups(_ mutations: [Mutation]) -> [ArraySlice<Mutation>] {
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

    /// What one transaction knows of its client: the last id, the new run's digests and answers,
    /// the recorded runs read so far, and the bases already checked.
    struct Run {
        let client: String
        var last: UInt64
        var digests: [UInt8] = []
        var results: [UInt8] = [UInt8(ascii: "[")]
        var kept: [UInt64: (run: RecordedRun, answers: [MutationResult])] = [:]
        /// Bases (as sent) found to name commits this database holds.
        var held: [String: Token] = [:]
        /// Who pushes; and the `$rows` values a user's rules read, once each.
        let principal: Principal
        var context = UserWrite.Context()

        init(client: String, last: UInt64, principal: Principal) {
            self.client = client
            self.last = last
            self.principal = principal
        }
    }

    /// One mutation: a repeat gets its recorded answer, the next one is decided and recorded.
    private static func apply(_ mutation: Mutation, _ run: inout Run, _ transaction: any WriteTransaction) async throws -> MutationResult {
        let digest = mutation.digest
        if mutation.id <= run.last {
            return try await repeated(mutation, digest: digest, &run, transaction)
        }
        guard mutation.id == run.last + 1 else {
            throw sequenceError(mutation, run.client, "leaves a gap: the next id must be \(run.last + 1)", last: run.last)
        }
        let result = try await decide(mutation, &run, transaction)
        if result.status == .applied {
            try await transaction.markWritten(mutation.recordID, by: run.client)
            try await transaction.log(
                mutation.recordID, user: run.principal.subject, client: run.client, mutation: mutation.id, operation: mutation.operation.rawValue)
        }
        if run.results.count > 1 { run.results.append(UInt8(ascii: ",")) }
        result.json.write(into: &run.results)
        run.digests.append(contentsOf: digest)
        run.last = mutation.id
        return result
    }

    /// The recorded answer to a repeated mutation, when its payload is the same.
    private static func repeated(_ mutation: Mutation, digest: [UInt8], _ run: inout Run, _ transaction: any WriteTransaction) async throws -> MutationResult {
        var entry = run.kept.values.first { $0.run.first <= mutation.id && mutation.id < $0.run.first + UInt64($0.run.count) }
        if entry == nil, let found = try await transaction.recorded(client: run.client, containing: mutation.id) {
            // A conflict's server record sits three levels deep: [{"server":{…}}].
            guard case .array(let items) = try JSONValue(parsing: found.results, limits: JSONLimits.default.enclosing(2)) else {
                throw StoreError(.corrupt, "push ledger of client \(String(reflecting: run.client))", "a recorded run is not a JSON array")
            }
            entry = (found, try items.map { try MutationResult(value: $0) })
            run.kept[found.first] = entry
        }
        guard let (kept, answers) = entry, mutation.id - kept.first < UInt64(answers.count) else {
            throw sequenceError(mutation, run.client, "was acknowledged before and is no longer kept", last: run.last)
        }
        let index = Int(mutation.id - kept.first)
        guard constantTimeEqual(kept.digests[(index * 32)..<(index * 32 + 32)], digest) else {
            throw sequenceError(mutation, run.client, "reuses an id with a different payload", last: run.last)
        }
        return try await shown(answers[index], mutation, &run, transaction)
    }

    /// A recorded answer as it may be shown now. Its `server` record was one the principal
    /// could read when it was recorded; a replay shows it only while they may read the row as it
    /// is stored now, under the rules, claims and `$rows` of this push (a membership removed, a
    /// row moved, a rule changed, a collection restricted since), and never more of the row
    /// than a read of it now would: a row hidden since is shown as its bare tombstone.
    /// Otherwise the answer is what a decision now would give over a record they may not read:
    /// `denied`, rule `read`, nothing of the record (no `base`).
    private static func shown(_ answer: MutationResult, _ mutation: Mutation, _ run: inout Run, _ transaction: any WriteTransaction) async throws
        -> MutationResult
    {
        guard let server = answer.server else { return answer }
        if case .owner = run.principal { return answer }
        var now: Record?
        if let stored = try await transaction.stored(mutation.recordID)?.record {
            switch try await run.principal.decide(mutation.collection, put: nil, stored: stored, in: transaction, context: &run.context) {
            case .allowed(_, let seen), .denied(_, let seen): now = seen
            }
        }
        guard let now else { return MutationResult(id: answer.id, status: .denied, rule: unreadRule) }
        guard now.hidden, !server.hidden else { return answer }
        return MutationResult(id: answer.id, status: answer.status, reason: answer.reason, server: now, base: answer.base, rule: answer.rule)
    }

    /// A push whose ids do not continue the client's sequence, with the last id recorded.
    private static func sequenceError(_ mutation: Mutation, _ client: String, _ why: String, last: UInt64) -> StoreError {
        var error = StoreError(.mutationSequence, "mutation \(mutation.id) of client \(String(reflecting: client))", why, evidence: "last mutation \(last)")
        error.lastMutation = last
        return error
    }

    /// The rule a `denied` result names when a record the principal may not read holds the id.
    package static let unreadRule = "read"

    /// Decides and, when it applies, writes one new mutation.
    ///
    /// Over a record the principal may not read, nothing is answered from what the record holds
    /// before the conflict rule has passed: a conflict is `denied` (rule `read`) whatever the
    /// record says, and only a delete of a hidden one is `unchanged` at once, as of a missing one.
    private static func decide(_ mutation: Mutation, _ run: inout Run, _ transaction: any WriteTransaction) async throws -> MutationResult {
        if let problem = mutation.problem { return MutationResult(id: mutation.id, status: .invalid, reason: problem) }
        // Before anything is read: a collection the principal may not write says nothing of its records.
        guard run.principal.mayWrite(mutation.collection) else {
            // Decided under the rules pinned for the request: recorded only if they are the database's.
            if case .user(let user) = run.principal { try await user.checkVersion(in: transaction, context: &run.context) }
            return MutationResult(id: mutation.id, status: .denied, rule: Principal.collectionRule)
        }
        let current = try await transaction.stored(mutation.recordID)
        let wantsHidden = mutation.operation == .delete
        let written: Record?
        let seen: Record?
        switch try await run.principal.decide(mutation.collection, put: mutation.record, stored: current?.record, in: transaction, context: &run.context) {
        case .denied(let rule, let visible): return MutationResult(id: mutation.id, status: .denied, server: visible, rule: rule)
        case .allowed(let stamped, let visible):
            written = stamped
            seen = visible
        }
        if mutation.operation == .put, let record = written,
            let refusal = try await transaction.blobRefusal(record, user: run.principal.subject, previous: seen)
        {
            return MutationResult(id: mutation.id, status: .invalid, reason: refusal.description)
        }
        guard let current else {
            if mutation.operation == .delete { return MutationResult(id: mutation.id, status: .unchanged) }
            try await transaction.put(written!, replacing: nil)
            return MutationResult(id: mutation.id, status: .applied)
        }
        let same = current.record.hidden == wantsHidden && (wantsHidden || current.record.body == written?.body)
        if same && (seen != nil || wantsHidden) { return MutationResult(id: mutation.id, status: .unchanged) }
        if let reason = try await conflict(mutation, current, &run, transaction) {
            guard let seen else { return MutationResult(id: mutation.id, status: .denied, rule: unreadRule) }
            return MutationResult(id: mutation.id, status: .conflict, reason: reason.rawValue, server: seen, base: current.token.entityTag)
        }
        if same { return MutationResult(id: mutation.id, status: .unchanged) }
        switch mutation.operation {
        case .put: try await transaction.put(written!, replacing: current.record)
        case .delete: try await transaction.hide(id: mutation.recordID)
        }
        return MutationResult(id: mutation.id, status: .applied)
    }

    /// `clientOwned` unless `client` is `principal`'s: a client id belongs to the principal that
    /// first pushes with it (the owner, the client key, or one user), claimed in the transaction
    /// that records its first answers.
    private static func checkOwner(_ client: String, _ principal: Principal, _ transaction: any WriteTransaction) async throws {
        let owner = try await transaction.owner(client: client)
        if owner == principal.ledgerName { return }
        if owner == nil {
            guard try await transaction.lastMutation(client: client) > 0 else {
                try await transaction.claim(client: client, for: principal.ledgerName)
                return
            }
            // Pushed before every principal's client ids were recorded (only users' were): the
            // owner's or the client key's, and open to both as it was; never to a user.
            if principal.subject == nil { return }
        }
        throw StoreError(.clientOwned, "client \(String(reflecting: client))", "belongs to another principal: each install pushes with its own client id")
    }

    /// Why writing over `current` would overwrite a change the app has not seen, or nil.
    ///
    /// A version written by this client's own earlier push was seen: the app made this mutation
    /// on top of its own edit. Otherwise the version was seen when its position is not after the base.
    private static func conflict(_ mutation: Mutation, _ current: StoredRecord, _ run: inout Run, _ transaction: any WriteTransaction) async throws
        -> MutationResult.ConflictReason?
    {
        if current.writer == run.client { return nil }
        if mutation.create && !current.record.hidden { return .exists }
        guard let text = mutation.base else { return current.record.hidden ? .hidden : .changed }
        let base: Token
        if let known = run.held[text] {
            base = known
        } else {
            guard let parsed = mutation.baseToken else { return .unknownBase }
            guard try await transaction.holds(parsed) else { return .unknownBase }
            run.held[text] = parsed
            base = parsed
        }
        if current.token.position <= base.position { return nil }
        return current.record.hidden ? .hidden : .changed
    }
}

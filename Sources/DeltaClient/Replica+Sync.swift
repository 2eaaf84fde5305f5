import DeltaCore
import DeltaSQLite
import Foundation

extension Replica {
    /// Syncs every collection with the server and says what changed.
    ///
    /// One sync runs at a time: a call made while one runs joins it and gets its report.
    /// Cancelling the caller cancels the sync; the store then keeps its previous state.
    /// Throws `ReplicaError`: a network failure, a `5xx` or a `429` leaves the data as it was and
    /// sets a back-off (doubling, and at least the server's `Retry-After`), during which `sync()`
    /// throws `.backingOff` without sending anything; `force: true` tries anyway (the app knows
    /// the network just came back). With `pull: false` it only pushes the queued writes (the
    /// report then lists no collection); a call that joins a running sync gets that sync's
    /// report, whichever it was.
    public func sync(pull: Bool = true, force: Bool = false) async throws -> SyncReport {
        let started: Task<SyncReport, any Error>? = coordination.withLock { state in
            if state.signingOut { return nil }
            if let running = state.running { return running }
            let task = Task { try await self.runSync(pull: pull, force: force) }
            state.running = task
            return task
        }
        guard let task = started else {
            throw ReplicaError(.configuration, "sync: the replica is signing out; sync again once signOut returns")
        }
        return try await withTaskCancellationHandler {
            try await task.value
        } onCancel: {
            task.cancel()
        }
    }

    /// Syncs unless the last successful sync is less than `minimumInterval` seconds old, or a
    /// back-off is running; returns nil when it did not sync.
    public func syncIfNeeded(minimumInterval: TimeInterval) async throws -> SyncReport? {
        let (lastSuccess, retryAt) = try await store.run { database, _ in
            (try database.syncValue("last_success"), try database.syncValue("retry_at"))
        }
        let now = Date().timeIntervalSince1970
        if let lastSuccess, now - lastSuccess < minimumInterval { return nil }
        if let retryAt, now < retryAt { return nil }
        return try await sync()
    }

    private func runSync(pull: Bool, force: Bool) async throws -> SyncReport {
        defer { coordination.withLock { $0.running = nil } }
        emit(.started)
        do {
            if !force, let retryAt = try await store.run({ database, _ in try database.syncValue("retry_at") }), Date().timeIntervalSince1970 < retryAt {
                throw ReplicaError(
                    .backingOff, "the last sync failed; waiting before the next attempt", evidence: "retry at \(Date(timeIntervalSince1970: retryAt))",
                    retryAt: Date(timeIntervalSince1970: retryAt))
            }
            statusFeed.update { $0.phase = .syncing }
            // Another user's token signs the previous one out before anything is sent.
            try await checkUser()
            // Push first, so that the pull brings the app's own writes back as the server has them.
            var pushed = PushSummary()
            var pushError: ReplicaError?
            do { pushed = try await push() } catch let error as ReplicaError { pushError = error }
            if pushed.applied + pushed.unchanged + pushed.conflicts.count > 0 {
                changes.publish(nil)
                scheduleWriteRefresh()
            }
            var results: [CollectionSync] = []
            for collection in collections where pull {
                try Task.checkCancellation()
                // A pull names the client only while some of its writes wait for one to confirm them.
                let awaiting = try await store.run { [outbox] _, _ in try outbox.awaitsConfirmation(collection) }
                let result = try await sync(collection, confirming: awaiting)
                results.append(result)
                if awaiting, let last = result.confirmed {
                    try await store.run { [outbox] _, _ in try outbox.pulled(collection, lastMutation: last) }
                }
                if awaiting || result.changedData { changes.publish([collection]) }
            }
            await downloadEagerBlobs()
            if let pushError, pushError.isTransient { throw pushError }
            let finished = Date()
            try await store.run { database, _ in
                try database.setSyncValue("failures", nil)
                try database.setSyncValue("retry_at", nil)
                try database.setSyncValue("last_success", finished.timeIntervalSince1970)
            }
            let report = SyncReport(collections: results, pushed: pushed, pushError: pushError)
            statusFeed.update {
                $0.phase = .idle
                $0.lastSyncDate = finished
                $0.lastError = nil
            }
            scheduleWriteRefresh()
            emit(.finished(report))
            return report
        } catch let error as ReplicaError {
            let failure = error.kind == .backingOff ? error : try await recordFailure(error)
            // A collection reset before the failure changed; live queries check theirs.
            if error.kind != .backingOff { changes.publish(nil) }
            statusFeed.update {
                $0.phase = failure.retryAt.map { .backingOff(until: $0) } ?? .idle
                $0.lastError = failure
            }
            emit(.failed(failure))
            throw failure
        } catch {
            changes.publish(nil)
            statusFeed.update { $0.phase = .idle }
            throw error
        }
    }

    /// Counts the failure and sets the back-off; returns the error with its retry time.
    private func recordFailure(_ error: ReplicaError) async throws -> ReplicaError {
        let configuration = self.configuration
        let retryAt = try await store.run { database, _ -> Date in
            let failures = Int(try database.syncValue("failures") ?? 0) + 1
            var delay = configuration.backoff(afterFailures: failures)
            if let asked = error.retryAt?.timeIntervalSinceNow, asked > delay { delay = asked }
            let retryAt = Date().addingTimeInterval(delay)
            try database.setSyncValue("failures", Double(failures))
            try database.setSyncValue("retry_at", retryAt.timeIntervalSince1970)
            return retryAt
        }
        return error.retrying(at: retryAt)
    }

    /// Syncs one collection: the delta since its token, or a reset when that cannot be applied.
    private func sync(_ collection: String, confirming: Bool) async throws -> CollectionSync {
        guard let state = try await store.run({ database, _ in try database.state(of: collection) }) else {
            throw ReplicaError(.store, "the collection was never installed", evidence: collection)
        }
        // Installed from a snapshot baked for another selection: no token to send yet.
        let sent: CollectionState? = state.entityTag.isEmpty ? nil : state
        let fetched: Fetched
        do {
            fetched = try await fetcher.get(configuration.url(of: collection), validators: sent, confirming: confirming)
        } catch let failure as UndecodableTransfer {
            return try await resetUnlessLooping(collection, because: .undecodableBody(failure.detail), keeping: state.entityTag, confirming: confirming)
        }
        defer { fetched.discard() }
        // A collection for signed-in users, and nobody signed in: it keeps its data; the others sync.
        if fetched.status == 401, fetched.problemType == "unauthorized" {
            return CollectionSync(collection: collection, outcome: .signInRequired, reset: nil, entityTag: state.entityTag)
        }
        try await notePrivacy(fetched, of: collection)
        let reason: ResetReason
        switch try Verdict(fetched, sent: sent) {
        case .notModified(let entityTag, let lastModified, let digest):
            do {
                let stored = try await store.run { database, _ in
                    try database.checkNotModified(digest, of: collection)
                    return try database.repeatValidators(entityTag, lastModified, of: collection)
                }
                return CollectionSync(collection: collection, outcome: .notModified, reset: nil, entityTag: stored ?? state.entityTag)
                    .confirming(fetched.lastMutation)
            } catch let failure as ApplyFailure {
                reason = failure.reason
            }
        case .reset(let why):
            reason = why
        case .apply(let answer):
            do {
                let (outcome, changed) = try await store.run { database, cancelled in
                    let result = try database.commit(collection, restoreFrom: nil, answer: answer, cancelled: cancelled)
                    // A delta that applies cleanly ends a streak of resets.
                    if case .applied = result.0 { try database.setResetStreak(nil, of: collection) }
                    return result
                }
                return CollectionSync(collection: collection, outcome: outcome, reset: nil, entityTag: answer.entityTag, changed: changed)
                    .confirming(fetched.lastMutation)
            } catch let failure as ApplyFailure {
                reason = failure.reason
            }
        }
        return try await resetUnlessLooping(collection, because: reason, keeping: state.entityTag, confirming: confirming)
    }

    /// Marks `collection` as the user's when its answer depends on who asks, before its rows are
    /// applied, so that a sign-out removes them.
    func notePrivacy(_ fetched: Fetched, of collection: String) async throws {
        guard fetched.isPrivate else { return }
        try await store.run { database, _ in try database.markPrivate(collection) }
    }
}

import DeltaCore
import DeltaSQLite
import Foundation

extension Replica {
    /// Syncs every collection with the server and says what changed.
    ///
    /// One sync runs at a time: a call made while one runs joins it and gets its report.
    /// Cancelling a caller ends that caller's wait with `CancellationError`; the sync goes on for
    /// the others waiting on it, and is cancelled only when every caller waiting has been (the
    /// store then keeps its previous state).
    /// Throws `ReplicaError`: a network failure, a `5xx` or a `429` leaves the data as it was and
    /// sets a back-off (doubling, and at least the server's `Retry-After`), during which `sync()`
    /// throws `.backingOff` without sending anything; `force: true` tries anyway (the app knows
    /// the network just came back). With `pull: false` it only pushes the queued writes (the
    /// report then lists no collection); a call that joins a running sync gets that sync's
    /// report, whichever it was.
    @discardableResult
    public func sync(pull: Bool = true, force: Bool = false) async throws -> SyncReport {
        let waiter = UUID()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<SyncReport, any Error>) in
                let refusal: (any Error)? = coordination.withLock { state in
                    // Under the lock the cancellation handler takes too: a caller cancelled before it
                    // waits is answered here, one cancelled after is found by the handler.
                    if Task.isCancelled { return CancellationError() }
                    if state.signingOut > 0 { return ReplicaError(.configuration, "sync: the replica is signing out; sync again once signOut returns") }
                    if state.running == nil || state.abandoned {
                        // One sync at a time: a new one after a cancelled one starts once that one has ended.
                        let previous = state.running
                        state.generation += 1
                        state.abandoned = false
                        let generation = state.generation
                        state.running = Task {
                            _ = await previous?.result
                            return try await self.shared(generation, pull: pull, force: force)
                        }
                    }
                    state.waiters[waiter] = (state.generation, continuation)
                    return nil
                }
                if let refusal { continuation.resume(throwing: refusal) }
            }
        } onCancel: {
            let (continuation, last) = coordination.withLock { state -> (CheckedContinuation<SyncReport, any Error>?, Task<SyncReport, any Error>?) in
                guard let (generation, continuation) = state.waiters.removeValue(forKey: waiter) else { return (nil, nil) }
                // The last caller of the running sync left: it is cancelled, and forgotten by the next caller.
                guard generation == state.generation, !state.waiters.values.contains(where: { $0.generation == generation }) else {
                    return (continuation, nil)
                }
                state.abandoned = true
                return (continuation, state.running)
            }
            continuation?.resume(throwing: CancellationError())
            last?.cancel()
        }
    }

    /// The sync every caller waiting for `generation` shares: when it ends, it answers them and,
    /// unless a newer one started, stops being the running one, in one step (a caller arriving
    /// after starts another).
    private func shared(_ generation: Int, pull: Bool, force: Bool) async throws -> SyncReport {
        let result: Result<SyncReport, any Error>
        if Task.isCancelled {
            // Every caller left before it began: nothing is asked, sent or counted as a failure.
            result = .failure(CancellationError())
        } else {
            do { result = .success(try await runSync(pull: pull, force: force)) } catch { result = .failure(error) }
        }
        let waiting = coordination.withLock { state in
            let mine = state.waiters.filter { $0.value.generation == generation }
            for key in mine.keys { state.waiters[key] = nil }
            if state.generation == generation {
                state.running = nil
                state.abandoned = false
            }
            return mine.values.map(\.continuation)
        }
        for continuation in waiting { continuation.resume(with: result) }
        return try result.get()
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
        emit(.started)
        // Live queries see each collection once its pull is done, not the steps in between (a
        // reset's snapshot before its delta, a push's answers before the pull confirming them).
        // The app's own writes meanwhile show at once (`Outbox.appWrite`).
        changes.hold()
        defer { changes.release() }
        do {
            // A back-off a later success could not clear in the store (a full disk) is over.
            if !force, !coordination.withLock({ $0.backoffCleared }),
                let (retryAt, cause) = try await store.run({ database, _ in
                    try database.syncValue("retry_at").map { ($0, try database.syncText("last_failure")) }
                }),
                Date().timeIntervalSince1970 < retryAt
            {
                throw ReplicaError(
                    .backingOff, "the last sync failed; waiting before the next attempt (sync(force: true) tries now)",
                    evidence: "retry at \(Date(timeIntervalSince1970: retryAt))" + (cause.map { "; the last failure: \($0)" } ?? ""),
                    retryAt: Date(timeIntervalSince1970: retryAt))
            }
            statusFeed.update { $0.phase = .syncing }
            // Another user's token signs the previous one out before anything is sent.
            try await checkUser()
            // Push first, so that the pull brings the app's own writes back as the server has them.
            var pushed = PushSummary()
            var pushError: ReplicaError?
            var refusedBlobs: [String] = []
            do { pushed = try await push(refusedBlobs: &refusedBlobs) } catch let error as ReplicaError { pushError = error }
            if pushError == nil, !refusedBlobs.isEmpty {
                // The push went on without them: the app learns why its writes were turned down.
                pushError = ReplicaError(
                    .refused, "the server refused blobs for good; the writes that reference them are turned down (rejected(), conflicts())",
                    evidence: refusedBlobs.joined(separator: "; "))
            }
            if pushed.applied + pushed.unchanged + pushed.conflicts.count > 0 { scheduleWriteRefresh() }
            var results: [CollectionSync] = []
            for collection in collections where pull {
                try Task.checkCancellation()
                // A pull names the client only while some of its writes wait for one to confirm them.
                let awaiting = try await store.run { [outbox] _, _ in try outbox.awaitsConfirmation(collection) }
                let result = try await sync(collection, confirming: awaiting)
                results.append(result)
                if awaiting, let last = result.confirmed {
                    // Out of space, the confirmation waits for the next pull; the data is in.
                    try await toleratingFullDisk { try await self.store.run { [outbox] _, _ in try outbox.pulled(collection, lastMutation: last) } }
                }
                changes.flush()
            }
            await downloadEagerBlobs()
            if let pushError, pushError.isTransient { throw pushError }
            let finished = Date()
            let serverURL = configuration.serverURL.absoluteString
            // What the sync brought is committed: bookkeeping that finds no space does not undo that.
            let noted = try await toleratingFullDisk {
                try await self.bookkeep(finished: finished, serverURL: serverURL)
            }
            coordination.withLock { $0.backoffCleared = !noted }
            let report = SyncReport(collections: results, pushed: pushed, pushError: pushError)
            statusFeed.update {
                $0.phase = .idle
                $0.lastSyncDate = finished
                // A push the server refused for good is the sync's error even though the pull went on.
                $0.lastError = pushError
            }
            scheduleWriteRefresh()
            emit(.finished(report))
            return report
        } catch let error as ReplicaError {
            let failure = error.kind == .backingOff ? error : try await recordFailure(error)
            statusFeed.update {
                $0.phase = failure.retryAt.map { .backingOff(until: $0) } ?? .idle
                // A sync refused during a back-off keeps the cause of the back-off in view.
                if error.kind != .backingOff || $0.lastError == nil { $0.lastError = failure }
            }
            emit(.failed(failure))
            throw failure
        } catch {
            statusFeed.update { $0.phase = .idle }
            throw error
        }
    }

    /// A successful sync's bookkeeping: no back-off, when it ended, and the server it synced with.
    private func bookkeep(finished: Date, serverURL: String) async throws {
        try await store.run { database, _ in
            try database.setSyncValue("failures", nil)
            try database.setSyncValue("retry_at", nil)
            try database.setSyncValue("last_success", finished.timeIntervalSince1970)
            try database.setSyncText("last_failure", nil)
            // For tools that reopen the store without a configuration (`deltasnap blob`).
            try database.setSyncText("server", serverURL)
        }
    }

    /// Runs `work`; a full disk is not a failure of what called it (the work was bookkeeping).
    /// Returns whether `work` was done (false: the disk was full).
    @discardableResult
    private func toleratingFullDisk(_ work: () async throws -> Void) async throws -> Bool {
        do { try await work() } catch let error as ReplicaError where error.kind == .diskFull { return false }
        return true
    }

    /// Counts the failure and sets the back-off; returns the error with its retry time.
    /// Without space to note it, the back-off is the first one's and the error stays the cause.
    private func recordFailure(_ error: ReplicaError) async throws -> ReplicaError {
        let configuration = self.configuration
        // A new failure's back-off holds, whatever an earlier success could not note.
        coordination.withLock { $0.backoffCleared = false }
        do {
            return error.retrying(at: try await noteFailure(error))
        } catch let full as ReplicaError where full.kind == .diskFull {
            return error.retrying(at: Date().addingTimeInterval(Self.delay(afterFailures: 1, of: error, configuration)))
        }
    }

    /// How long to wait after `failures` failures in a row, the last `error`: the configured
    /// back-off, or the server's `Retry-After` when that is longer.
    static func delay(afterFailures failures: Int, of error: ReplicaError, _ configuration: ReplicaConfiguration) -> TimeInterval {
        let delay = configuration.backoff(afterFailures: failures)
        guard let asked = error.retryAt?.timeIntervalSinceNow else { return delay }
        return max(delay, asked)
    }

    /// Counts the failure in the store and sets the back-off; returns the retry time.
    private func noteFailure(_ error: ReplicaError) async throws -> Date {
        let configuration = self.configuration
        return try await store.run { database, _ -> Date in
            let failures = Int(try database.syncValue("failures") ?? 0) + 1
            let retryAt = Date().addingTimeInterval(Self.delay(afterFailures: failures, of: error, configuration))
            try database.setSyncValue("failures", Double(failures))
            try database.setSyncValue("retry_at", retryAt.timeIntervalSince1970)
            try database.setSyncText("last_failure", error.description)
            return retryAt
        }
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

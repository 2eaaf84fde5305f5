import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

extension Replica {
    /// Live updates, for an app in the foreground: a sync now, then one each time the server says
    /// a collection changed, as an async sequence of their reports.
    ///
    /// Between syncs it asks the server `HEAD /api/{collection}?wait=SECONDS` for every collection
    /// at once, with the stored validators: the server holds each until a commit changes that
    /// collection (or `wait` passes), so an app learns of a change within about a second, without
    /// polling and without downloading anything twice. A network failure, `5xx` or `429` waits for
    /// the back-off the failed sync set (or the server's `Retry-After`), then goes on; any other
    /// failure ends the sequence with that error. Stop it by cancelling the task that iterates it.
    ///
    /// ```swift
    /// for try await report in replica.updates() where report.changedData { reload() }
    /// ```
    public func updates(wait seconds: Int = 25) -> AsyncThrowingStream<SyncReport, any Error> {
        AsyncThrowingStream { continuation in
            let task = Task {
                var changed = true
                while !Task.isCancelled {
                    do {
                        if changed { continuation.yield(try await self.sync()) }
                        changed = try await self.awaitChange(seconds)
                    } catch let error as ReplicaError where error.isTransient {
                        let delay = max(1, error.retryAt?.timeIntervalSinceNow ?? configuration.backoff(afterFailures: 1))
                        try? await Task.sleep(for: .seconds(delay))
                        changed = true
                    } catch is CancellationError {
                        break
                    } catch {
                        continuation.finish(throwing: error)
                        return
                    }
                }
                continuation.finish()
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }

    /// Holds one `HEAD ?wait=` per collection; true as soon as one answers other than `304`
    /// (the others are cancelled), false when all answered `304` at the end of the wait.
    func awaitChange(_ seconds: Int) async throws -> Bool {
        var probes: [(URL, CollectionState?)] = []
        for collection in collections {
            let state = try await store.run { database, _ in try database.state(of: collection) }
            guard let state, !state.entityTag.isEmpty else { return true }
            probes.append((configuration.url(of: collection), state))
        }
        let timeout = TimeInterval(seconds) + configuration.requestTimeout
        let started = ContinuousClock.now
        let changed = try await withThrowingTaskGroup(of: Bool.self) { group in
            for (url, state) in probes {
                group.addTask { [fetcher] in try await fetcher.probe(url, validators: state, wait: seconds, timeout: timeout) != 304 }
            }
            for try await changed in group where changed {
                group.cancelAll()
                return true
            }
            return false
        }
        // A server (or a cache on the way) that does not hold the request: never probe in a tight loop.
        let floor = Duration.seconds(min(seconds, 5))
        if !changed, ContinuousClock.now - started < floor { try await Task.sleep(for: floor - (ContinuousClock.now - started)) }
        return changed
    }
}

extension Fetcher {
    /// `HEAD` with the validators and `wait=SECONDS` added to the query: the status alone. `429`
    /// and `5xx` throw `.serverUnavailable` (with `Retry-After`); no answer throws `.network`.
    func probe(_ url: URL, validators: CollectionState?, wait: Int, timeout: TimeInterval) async throws -> Int {
        guard var components = URLComponents(url: url, resolvingAgainstBaseURL: false) else { return 200 }
        components.percentEncodedQuery = (components.percentEncodedQuery.map { $0 + "&" } ?? "") + "wait=\(wait)"
        var request = URLRequest(url: components.url ?? url)
        request.httpMethod = "HEAD"
        request.cachePolicy = .reloadIgnoringLocalCacheData
        request.timeoutInterval = timeout
        if let validators {
            request.setValue(validators.entityTag, forHTTPHeaderField: "If-None-Match")
            request.setValue(validators.lastModified, forHTTPHeaderField: "If-Modified-Since")
        }
        // A user's long-poll carries their token like their pulls (a 401 makes the next sync refresh it).
        if let bearer = try await credentials?.token(refreshing: false) { request.setValue("Bearer \(bearer)", forHTTPHeaderField: "Authorization") }
        let (status, headers) = try await perform { (continuation: CheckedContinuation<(Int, [String: String]), any Error>) in
            session.dataTask(with: request) { _, response, error in
                continuation.resume(with: Result { try Self.answer(response, error, url: url) })
            }
        }
        if status == 429 || status >= 500 {
            throw ReplicaError(
                .serverUnavailable, "the server cannot answer now", evidence: "\(status) to HEAD \(url.absoluteString)",
                retryAt: headers["retry-after"].flatMap(Verdict.retryAfter))
        }
        return status
    }
}

import DeltaCore
import DeltaSQLite
import Foundation

extension Replica {
    /// Pushes every queued mutation, oldest first, in batches of `pushBatchSize`: each batch is
    /// marked sent before it leaves and resent as it is until the server answers, which applies
    /// each mutation once however often it arrives. Conflicts are stored and announced.
    /// The outbox's SQLite work runs on the store's queue, off Swift's cooperative threads.
    /// `refusedBlobs` gets the server's answers to the blobs it refused for good: the batches
    /// went anyway, and the writes referencing those blobs came back turned down.
    func push(refusedBlobs: inout [String]) async throws -> PushSummary {
        let outbox = self.outbox
        let limit = configuration.pushBatchSize
        var summary = PushSummary()
        let url = configuration.resolvedPushURL
        var restarted = false
        // A read first: a replica with nothing queued (most syncs) writes nothing to its outbox.
        guard try await store.run({ _, _ in try outbox.hasQueued() }) else { return summary }
        var batch = try await store.run { _, _ in try outbox.nextBatch(limit: limit) }
        while !batch.isEmpty {
            try Task.checkCancellation()
            for refusal in try await uploadBlobs(of: batch) where !refusedBlobs.contains(refusal) { refusedBlobs.append(refusal) }
            let body = PushRequest(client: outbox.clientID, mutations: batch).bytes
            let answer = try await withCredential { [fetcher] key in try await fetcher.post(url, json: body, key: key) }
            switch answer.status {
            case 200:
                let parsed: PushResponse
                do { parsed = try PushResponse(parsing: answer.body) } catch {
                    throw ReplicaError(.unusableAnswer, "the push answer is not a push answer", evidence: "\(url.absoluteString): \(error)")
                }
                guard parsed.results.count == batch.count, zip(parsed.results, batch).allSatisfy({ $0.id == $1.id }) else {
                    throw ReplicaError(
                        .unusableAnswer, "the push answer does not answer the mutations sent", evidence: "\(batch.count) sent, \(parsed.results.count) answered"
                    )
                }
                let sent = batch
                let settled = try await store.run { _, _ in try outbox.settle(parsed, sent: sent, next: limit) }
                summary.applied += settled.summary.applied
                summary.unchanged += settled.summary.unchanged
                summary.conflicts += settled.summary.conflicts
                for conflict in settled.summary.conflicts {
                    if conflict.reason == Self.deniedCollection { readOnly.withLock { _ = $0.insert(conflict.collection) } }
                    emit(.conflict(conflict))
                }
                batch = settled.next
            case 429, 500...599:
                throw ReplicaError(
                    .serverUnavailable, "the server cannot take the push now", evidence: "HTTP \(answer.status) from \(url.absoluteString)",
                    retryAt: answer.headers["retry-after"].flatMap(Verdict.retryAfter))
            case 409 where !restarted:
                // The server has none of this client's mutations after its last: a new database.
                // Number again from there (once per push), then resend.
                guard let last = Self.lastMutation(in: answer.body), last + 1 < batch[0].id else { fallthrough }
                restarted = true
                batch = try await store.run { _, _ in
                    try outbox.restartNumbering(after: last)
                    return try outbox.nextBatch(limit: limit)
                }
            default:
                let detail = String(decoding: answer.body.prefix(300), as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
                throw ReplicaError(.refused, "the server refused the push; the writes stay queued", evidence: "HTTP \(answer.status): \(detail)")
            }
        }
        return summary
    }

    /// A turned-down write's reason when the server takes no writes to its collection from this
    /// credential (`denied` with rule `collection`).
    static let deniedCollection = "denied: collection"

    /// The `lastMutationId` of a `409 mutation-sequence` problem.
    static func lastMutation(in body: Data) -> UInt64? {
        guard let problem = try? JSONValue(parsing: Array(body)), case .number(let text)? = problem["lastMutationId"] else { return nil }
        return UInt64(text)
    }
}

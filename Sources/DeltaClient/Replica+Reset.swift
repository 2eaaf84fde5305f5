import DeltaCore
import Foundation

extension Replica {
    /// Resets `collection` to the bundled snapshot and syncs again from the snapshot's token;
    /// when the server rejects that too, fetches the full dataset. The restore and the answer
    /// that follows it commit together, so readers see the old data until the new state is whole.
    /// With `confirming`, the answer applied says which of the client's writes it holds (`confirmed`).
    func reset(_ collection: String, because reason: ResetReason, confirming: Bool) async throws -> CollectionSync {
        let snapshot = configuration.snapshotURL
        guard let entry = manifest.collections.first(where: { $0.name.rawValue == collection }) else {
            throw ReplicaError(.snapshot, "the bundled snapshot no longer holds the collection", evidence: collection)
        }
        let pristine = CollectionState(entityTag: entry.entityTag, lastModified: entry.lastModified, snapshotTag: entry.entityTag)
        // A snapshot baked for another selection has no token this selection can sync from.
        guard ReplicaDatabase.snapshotFits(entry.entityTag, configuration.selection(of: collection)) else {
            return try await fetchFull(collection, because: reason, confirming: confirming)
        }
        let url = configuration.url(of: collection)
        let second: Fetched
        do {
            second = try await fetcher.get(url, validators: pristine, confirming: confirming)
        } catch is UndecodableTransfer {
            return try await fetchFull(collection, because: reason, confirming: confirming)
        } catch let error as ReplicaError {
            try await restoreOnly(collection)
            throw error
        }
        defer { second.discard() }
        try await notePrivacy(second, of: collection)
        let verdict: Verdict
        do { verdict = try Verdict(second, sent: pristine) } catch let error as ReplicaError {
            try await restoreOnly(collection)
            throw error
        }
        switch verdict {
        case .notModified(let entityTag, let lastModified, let digest):
            try await restoreOnly(collection)
            // The snapshot's records must be the server's state at the snapshot's token.
            guard try await store.run({ database, _ in try database.digest(of: collection) == digest }) else {
                return try await fetchFull(collection, because: reason, confirming: confirming)
            }
            let stored = try await store.run { database, _ in try database.repeatValidators(entityTag, lastModified, of: collection) }
            return CollectionSync(collection: collection, outcome: .notModified, reset: reason, entityTag: stored ?? pristine.entityTag, changed: .all)
                .confirming(second.lastMutation)
        case .apply(let answer):
            do {
                let (outcome, changed) = try await store.run { database, cancelled in
                    try database.commit(collection, restoreFrom: snapshot, answer: answer, cancelled: cancelled)
                }
                return CollectionSync(collection: collection, outcome: outcome, reset: reason, entityTag: answer.entityTag, changed: changed)
                    .confirming(second.lastMutation)
            } catch is ApplyFailure {
                return try await fetchFull(collection, because: reason, confirming: confirming)
            }
        case .reset:
            return try await fetchFull(collection, because: reason, confirming: confirming)
        }
    }

    /// The last resort: the full dataset, unconditionally. When even that cannot be applied, the
    /// collection is left at the bundled snapshot and the sync fails.
    private func fetchFull(_ collection: String, because reason: ResetReason, confirming: Bool) async throws -> CollectionSync {
        let full: Fetched
        do {
            full = try await fetcher.get(configuration.url(of: collection), validators: nil, confirming: confirming)
        } catch let failure as UndecodableTransfer {
            try await restoreOnly(collection)
            throw ReplicaError(
                .unusableAnswer, "the full dataset cannot be decoded either; the collection is back at the bundled snapshot", evidence: failure.detail)
        } catch let error as ReplicaError {
            try await restoreOnly(collection)
            throw error
        }
        defer { full.discard() }
        try await notePrivacy(full, of: collection)
        var failure: String
        do {
            switch try Verdict(full, sent: nil) {
            case .apply(let answer) where answer.mode == .full:
                let (outcome, changed) = try await store.run { database, cancelled in
                    try database.commit(collection, restoreFrom: nil, answer: answer, cancelled: cancelled)
                }
                return CollectionSync(collection: collection, outcome: outcome, reset: reason, entityTag: answer.entityTag, changed: changed)
                    .confirming(full.lastMutation)
            case .apply, .notModified:
                failure = "the server answered an unconditional request with something other than the full dataset"
            case .reset(let why):
                failure = why.description
            }
        } catch let apply as ApplyFailure {
            failure = apply.reason.description
        } catch let error as ReplicaError {
            try await restoreOnly(collection)
            throw error
        }
        try await restoreOnly(collection)
        throw ReplicaError(
            .unusableAnswer, "the full dataset cannot be applied either; the collection is back at the bundled snapshot", evidence: "\(collection): \(failure)")
    }

    /// Restores the bundled snapshot's state of `collection` alone, in one transaction.
    private func restoreOnly(_ collection: String) async throws {
        let snapshot = configuration.snapshotURL
        _ = try await store.run { database, cancelled in try database.commit(collection, restoreFrom: snapshot, answer: nil, cancelled: cancelled) }
    }
}

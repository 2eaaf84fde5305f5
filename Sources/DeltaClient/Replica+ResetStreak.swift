import Foundation

extension Replica {
    /// Resets `collection` because of `reason`, unless it reset for the same reason shortly
    /// before (`ResetStreak`): then it keeps its data (still at `entityTag`), says until when in
    /// its events and its report, and resets on a later sync, at the back-off's pace.
    func resetUnlessLooping(_ collection: String, because reason: ResetReason, keeping entityTag: String, confirming: Bool) async throws -> CollectionSync {
        let now = Date()
        let configuration = self.configuration
        let streak = try await store.run { database, _ in try database.resetStreak(of: collection) }
        if let until = streak?.nextAllowed(for: reason.kind, backoff: configuration.backoff(afterFailures:), now: now) {
            emit(.resetDeferred(collection: collection, reason: reason, until: until))
            return CollectionSync(collection: collection, outcome: .resetDeferred(reason, until: until), reset: nil, entityTag: entityTag)
        }
        // Counted before the reset runs, so that a reset cut short still counts.
        let next = streak?.adding(reason.kind, at: now) ?? ResetStreak(kind: reason.kind, at: now, count: 1)
        try await store.run { database, _ in try database.setResetStreak(next, of: collection) }
        emit(.reset(collection: collection, reason: reason))
        return try await reset(collection, because: reason, confirming: confirming)
    }
}

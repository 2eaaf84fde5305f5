import DeltaSQLite
import Foundation

/// The resets of one collection for the same reason, one soon after the other: what keeps a
/// replica from downloading its data again and again when something keeps failing the same way
/// (a server bug, a cache serving bad bytes, a digest that keeps failing).
///
/// The first reset for a reason happens at once. Another for the same reason waits until the
/// back-off (`ReplicaConfiguration.backoff(afterFailures:)`, counted in resets of the streak)
/// has passed since the last one; until then the collection keeps its data, the sync reports
/// `CollectionOutcome.resetDeferred`, and the event `SyncEvent.resetDeferred` says until when. A
/// delta applied cleanly ends the streak, and so does an hour without a reset.
struct ResetStreak: Equatable {
    /// The reason's kind (`ResetReason.kind`): details such as digests differ from one reset to the next.
    let kind: String
    /// When the last reset of the streak happened.
    let at: Date
    /// How many resets the streak holds.
    let count: Int

    /// A reset older than this starts a new streak.
    static let window: TimeInterval = 3600

    /// When a reset for `kind` may happen again, given this streak: now when it is another
    /// reason or the streak is stale.
    func nextAllowed(for kind: String, backoff: (Int) -> TimeInterval, now: Date) -> Date? {
        guard kind == self.kind, now.timeIntervalSince(at) < Self.window else { return nil }
        let allowed = at.addingTimeInterval(backoff(count))
        return allowed > now ? allowed : nil
    }

    /// The streak after a reset for `kind` at `now`.
    func adding(_ kind: String, at now: Date) -> ResetStreak {
        let continues = kind == self.kind && now.timeIntervalSince(at) < Self.window
        return ResetStreak(kind: kind, at: now, count: continues ? count + 1 : 1)
    }
}

extension ReplicaDatabase {
    /// The reset streak of `collection`, kept in `sync_state` as `reset:<collection>`.
    func resetStreak(of collection: String) throws -> ResetStreak? {
        guard let text = try connection.text("SELECT value FROM sync_state WHERE key = ?", .text("reset:" + collection)) else { return nil }
        let parts = text.split(separator: " ", maxSplits: 2).map(String.init)
        guard parts.count == 3, let at = Double(parts[0]), let count = Int(parts[1]) else { return nil }
        return ResetStreak(kind: parts[2], at: Date(timeIntervalSince1970: at), count: count)
    }

    /// Stores (or, with nil, ends) the reset streak of `collection`.
    func setResetStreak(_ streak: ResetStreak?, of collection: String) throws {
        if let streak {
            try connection.statement("INSERT OR REPLACE INTO sync_state(key, value) VALUES (?, ?)")
                .run(.text("reset:" + collection), .text("\(streak.at.timeIntervalSince1970) \(streak.count) \(streak.kind)"))
        } else {
            try connection.statement("DELETE FROM sync_state WHERE key = ?").run(.text("reset:" + collection))
        }
    }
}

extension ResetReason {
    /// What makes two resets "for the same reason": the case, and the server's signal.
    var kind: String {
        switch self {
        case .serverSignal(let signal): "server-signal:\(signal)"
        case .undecodableBody: "undecodable-body"
        case .invalidRecord: "invalid-record"
        case .integrity: "integrity"
        case .corruptStore: "corrupt-store"
        case .digestMismatch: "digest-mismatch"
        }
    }
}

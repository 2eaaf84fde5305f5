import DeltaSQLite
import Foundation

/// The replica's `SyncState`, kept current and sent, in order, to the `SyncStatus` object.
final class StatusFeed: Sendable {
    private let current: Locked<SyncState>
    private let followers = Locked([UUID: AsyncStream<SyncState>.Continuation]())
    /// The one `SyncStatus` of the replica, made on first use (typed `any Sendable` because a
    /// stored property cannot be limited to the systems that have Observation).
    let object = Locked<(any Sendable)?>(nil)

    init(_ initial: SyncState) { current = Locked(initial) }

    /// The state now.
    var state: SyncState { current.withLock { $0 } }

    /// Changes the state and tells the followers, in the order the changes were made.
    func update(_ change: (inout SyncState) -> Void) {
        current.withLock { state in
            let before = state
            change(&state)
            guard state != before else { return }
            for follower in followers.withLock({ Array($0.values) }) { follower.yield(state) }
        }
    }

    /// Every state from now on.
    func follow() -> AsyncStream<SyncState> {
        let (stream, continuation) = AsyncStream.makeStream(of: SyncState.self, bufferingPolicy: .bufferingNewest(1))
        let id = UUID()
        followers.withLock { $0[id] = continuation }
        continuation.onTermination = { [followers] _ in _ = followers.withLock { $0.removeValue(forKey: id) } }
        return stream
    }
}

extension Replica {
    /// Where syncing stands now, as a value (see `status` for an observable object).
    public var syncState: SyncState { statusFeed.state }

    /// The replica's sync status, for the app's UI: an `@Observable` object, the same one each time.
    @available(iOS 17, macOS 14, tvOS 17, watchOS 10, visionOS 1, *)
    @MainActor public var status: SyncStatus {
        // Made on the main actor only, so two callers never make two.
        if let status = statusFeed.object.withLock({ $0 }) as? SyncStatus { return status }
        // Following starts before the state is read, so no change is lost between the two.
        let states = statusFeed.follow()
        let status = SyncStatus(statusFeed.state, following: states)
        statusFeed.object.withLock { $0 = status }
        return status
    }

    /// When the last sync that succeeded ended, or nil if none has.
    public var lastSyncDate: Date? { statusFeed.state.lastSyncDate }

    /// Reads the outbox's counts into the status (after a local write, a push, a sign-out).
    func refreshWrites() async {
        guard let tally = try? await background({ [outbox] in try outbox.tally() }) else { return }
        statusFeed.update {
            $0.pendingWrites = tally.pending
            $0.conflicts = tally.conflicts
            $0.deniedWrites = tally.denied
        }
    }
}

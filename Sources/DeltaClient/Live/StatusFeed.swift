import DeltaSQLite
import Foundation

/// The replica's `SyncState`, kept current and sent, in order, to the `SyncStatus` object.
final class StatusFeed: Sendable {
    private let current: Locked<SyncState>
    private let followers = Locked([UUID: AsyncStream<SyncState>.Continuation]())
    /// The one `SyncStatus` of the replica, made on first use (typed `any Sendable` because a
    /// stored property cannot be limited to the systems that have Observation).
    let object = Locked<(any Sendable)?>(nil)
    /// Whether a refresh of the write counts runs, and whether another was asked for meanwhile.
    let refreshing = Locked((running: false, again: false))

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

    /// Reads the outbox's counts into the status soon, off the caller's path (after a local
    /// write). Asked for while a refresh runs, it folds into one more: a thousand puts in a row
    /// cost a few counts, not a thousand.
    func scheduleWriteRefresh() {
        let start = statusFeed.refreshing.withLock { state -> Bool in
            if state.running {
                state.again = true
                return false
            }
            state.running = true
            return true
        }
        guard start else { return }
        Task {
            repeat {
                statusFeed.refreshing.withLock { $0.again = false }
                await refreshWrites()
            } while statusFeed.refreshing.withLock { state in
                if state.again { return true }
                state.running = false
                return false
            }
        }
    }

    /// Reads the outbox's counts into the status; only `scheduleWriteRefresh` calls it, one at a time,
    /// so that an older count never lands after a newer one.
    private func refreshWrites() async {
        guard let tally = try? await background({ [outbox] in try outbox.tally() }) else { return }
        statusFeed.update {
            $0.pendingWrites = tally.pending
            $0.conflicts = tally.conflicts
            $0.deniedWrites = tally.denied
        }
    }
}

import Foundation
import Observation

/// A replica's sync status for the app's UI: the phase, the last successful sync, the pending,
/// conflicted and denied writes, and the last error. An `@Observable` object on the main actor
/// (`Replica.status`); it changes when a sync starts or ends and after each local write.
@available(iOS 17, macOS 14, tvOS 17, watchOS 10, visionOS 1, *)
@MainActor @Observable
public final class SyncStatus {
    /// What the replica is doing.
    public private(set) var phase: SyncState.Phase
    /// When the last sync that succeeded ended.
    public private(set) var lastSyncDate: Date?
    /// The app's writes the server does not have yet.
    public private(set) var pendingWrites: Int
    /// Writes that wait for `resolve` after a conflict.
    public private(set) var conflicts: Int
    /// Writes the server's rules refused.
    public private(set) var deniedWrites: Int
    /// Why the last sync failed; nil once one succeeds.
    public private(set) var lastError: ReplicaError?

    /// All of it as one value.
    public var state: SyncState {
        var state = SyncState()
        state.phase = phase
        state.lastSyncDate = lastSyncDate
        state.pendingWrites = pendingWrites
        state.conflicts = conflicts
        state.deniedWrites = deniedWrites
        state.lastError = lastError
        return state
    }

    /// Follows `states`, starting from `initial`.
    init(_ initial: SyncState, following states: AsyncStream<SyncState>) {
        phase = initial.phase
        lastSyncDate = initial.lastSyncDate
        pendingWrites = initial.pendingWrites
        conflicts = initial.conflicts
        deniedWrites = initial.deniedWrites
        lastError = initial.lastError
        Task { @MainActor [weak self] in
            for await state in states {
                guard let self else { return }
                self.apply(state)
            }
        }
    }

    private func apply(_ state: SyncState) {
        // Only what changed is set, so that views watching one property are not redrawn for another.
        if phase != state.phase { phase = state.phase }
        if lastSyncDate != state.lastSyncDate { lastSyncDate = state.lastSyncDate }
        if pendingWrites != state.pendingWrites { pendingWrites = state.pendingWrites }
        if conflicts != state.conflicts { conflicts = state.conflicts }
        if deniedWrites != state.deniedWrites { deniedWrites = state.deniedWrites }
        if lastError != state.lastError { lastError = state.lastError }
    }
}

import Foundation

/// Where a replica's syncing stands, as a value: what `SyncStatus` shows, and what
/// `Replica.syncState` returns on systems without the Observation framework.
public struct SyncState: Sendable, Equatable {
    /// What the replica is doing.
    public enum Phase: Sendable, Equatable {
        /// Not syncing; the next `sync()` goes ahead.
        case idle
        /// A sync is running.
        case syncing
        /// The last sync failed; `sync()` waits until then (`sync(force: true)` does not).
        case backingOff(until: Date)
    }

    /// What the replica is doing.
    public var phase: Phase = .idle
    /// When the last sync that succeeded ended (kept in the store, so it survives a relaunch).
    public var lastSyncDate: Date?
    /// The app's writes the server does not have yet (conflicts and denied writes not counted).
    public var pendingWrites = 0
    /// Writes that met another change at the server and wait for `resolve` (denied ones not counted).
    public var conflicts = 0
    /// Writes the server's rules refused, kept until the app resolves them (`Replica.rejected`).
    public var deniedWrites = 0
    /// Why the last sync failed, or the error of a push (or of blobs) the server refused for good
    /// (`SyncReport.pushError`: the pull still ran); nil once a sync succeeds without one. A sync refused during a back-off
    /// (`.backingOff`) does not replace the failure that caused the back-off.
    public var lastError: ReplicaError?

    /// Creates a state.
    public init() {}
}

import DeltaCore

/// A write the server did not apply because its copy changed since the app's edit (or the
/// pushed value was unusable). Never resolved silently: the app decides with `Replica.resolve`.
public struct Conflict: Sendable, Equatable {
    /// The collection.
    public let collection: String
    /// The record's id.
    public let id: String
    /// Why: `changed`, `hidden`, `exists`, `unknown-base` (docs/PROTOCOL.md), or `invalid: …`.
    public let reason: String
    /// The server's copy when the conflict was found (`hidden` when the server deleted it); nil when it has none.
    public let server: Record?
    /// The app's version (`hidden` when the app deleted it).
    public let local: Record
    /// The mutation the server turned down.
    public let mutation: UInt64
    /// The collection `ETag` at which `server` was current: a resolution is sent on top of it.
    let serverBase: String?
}

/// How the app settles a conflict.
public enum Resolution: Sendable, Equatable {
    /// Take the server's copy; the local edit is dropped.
    case keepServer
    /// Keep the app's version: sent again on top of the server's current version.
    case keepLocal
    /// A merged record (same id), sent on top of the server's current version.
    case merged(Record)
}

/// Where a record read from the replica stands.
public enum RecordState: String, Sendable, Equatable {
    /// As the server has it: no local write waits.
    case synced
    /// A local write waits to be pushed, or for a pull to confirm it.
    case pending
    /// A local write was turned down; `Replica.conflicts()` has both versions.
    case conflicted
}

/// What one push did.
public struct PushSummary: Sendable, Equatable {
    /// Mutations the server applied.
    public var applied = 0
    /// Mutations the server already held exactly.
    public var unchanged = 0
    /// Conflicts found by this push.
    public var conflicts: [Conflict] = []

    /// An empty summary.
    public init() {}
}

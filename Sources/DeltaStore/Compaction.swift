public import DeltaCore
public import Foundation

/// Dropping history a store no longer needs (docs/PROTOCOL.md, "Compaction"): hidden records and
/// superseded versions at or before a **horizon** position, in one transaction.
///
/// Tokens at or after the horizon keep getting exact deltas, selections too: a client there has
/// already seen every dropped tombstone, and of a record's superseded versions the newest one at
/// or before the horizon is kept (it is the record's state at any later token until its next
/// change). Tokens before the horizon get `409 expired`, and those clients reset.
///
/// A snapshot still shipped in apps holds a token; a reset sends those apps back to it. `bake`
/// records the tokens it bakes at (`BakedSnapshot`), and compaction keeps the horizon at or
/// before the oldest of them unless told to drop them, so a reset stays "snapshot + one delta".
package enum Compaction {
    /// The horizon a compaction asked for `asked` sets, given the current one and the recorded
    /// bakes: never earlier than the current horizon, and, unless `dropBaked`, never past a baked
    /// token. Also returns the bakes that held it back, and those whose tokens it expires.
    package static func plan(asked: UInt64, current: UInt64, baked: [BakedSnapshot], dropBaked: Bool) -> (
        horizon: UInt64, keptFor: [BakedSnapshot], expired: [BakedSnapshot]
    ) {
        var horizon = max(asked, current)
        var keptFor: [BakedSnapshot] = []
        if !dropBaked, let oldest = baked.map(\.position).min(), oldest < horizon {
            horizon = max(oldest, current)
            keptFor = baked.filter { $0.position < asked }
        }
        return (horizon, keptFor, baked.filter { $0.position < horizon })
    }

    /// The longest age `duration` reads: a thousand years, older than any commit.
    package static let longestDuration: TimeInterval = 1_000 * 365.25 * 86_400

    /// Reads a duration such as `30d`, `12h`, `90m` or `3600s` (a number and one unit), in
    /// seconds; nil for anything else, or for more than `longestDuration`.
    package static func duration(_ text: String) -> TimeInterval? {
        guard let unit = text.last, let amount = Double(text.dropLast()), amount >= 0, amount.isFinite else { return nil }
        let seconds: TimeInterval
        switch unit {
        case "s": seconds = amount
        case "m": seconds = amount * 60
        case "h": seconds = amount * 3600
        case "d": seconds = amount * 86400
        default: return nil
        }
        return seconds <= longestDuration ? seconds : nil
    }
}

/// A snapshot `deltasnap bake` made from this database: which collection, at which token, when.
public struct BakedSnapshot: Sendable, Equatable {
    /// The collection baked.
    public let collection: CollectionName
    /// The token the snapshot carries (its `ETag`, exactly).
    public let entityTag: String
    /// The token's position.
    public let position: UInt64
    /// When it was baked.
    public let bakedAt: Date

    /// Creates one.
    public init(collection: CollectionName, entityTag: String, position: UInt64, bakedAt: Date) {
        self.collection = collection
        self.entityTag = entityTag
        self.position = position
        self.bakedAt = bakedAt
    }
}

/// What a compaction did (or, for a dry run, would do).
public struct CompactionReport: Sendable, Equatable {
    /// The horizon before.
    public let previousHorizon: UInt64
    /// The horizon now: tokens before it are expired.
    public let horizon: UInt64
    /// Hidden records dropped.
    public let droppedHidden: Int
    /// Superseded versions dropped.
    public let droppedVersions: Int
    /// Recorded bakes that kept the horizon from going as far as asked.
    public let keptFor: [BakedSnapshot]
    /// Recorded bakes whose tokens the new horizon expires (their apps download the full dataset on a reset).
    public let expiredBakes: [BakedSnapshot]
    /// Whether nothing was changed (a dry run).
    public let dryRun: Bool
    /// Blobs dropped: stored before the horizon's commit (a blob records the position of the
    /// commit after its upload), and referenced by no row left, not even a tombstone.
    public var droppedBlobs = 0
    /// Their bytes.
    public var droppedBlobBytes: Int64 = 0

    /// Creates a report.
    public init(
        previousHorizon: UInt64, horizon: UInt64, droppedHidden: Int, droppedVersions: Int, keptFor: [BakedSnapshot], expiredBakes: [BakedSnapshot],
        dryRun: Bool
    ) {
        self.previousHorizon = previousHorizon
        self.horizon = horizon
        self.droppedHidden = droppedHidden
        self.droppedVersions = droppedVersions
        self.keptFor = keptFor
        self.expiredBakes = expiredBakes
        self.dryRun = dryRun
    }
}

public import DeltaCore
public import DeltaRules
public import Foundation

/// The store as the operator's commands see it: rules installed and followed, the grant key,
/// bakes and compaction, the mutation log (`deltasnap rules`, `bake`, `compact`, `log`, the
/// server's user options). A backend implements it as part of `ChangeStore`.
public protocol StoreAdministration: Sendable {
    /// Records that `deltasnap bake` made snapshots at these tokens, so that `compact` keeps them valid.
    func recordBakes(_ tokens: [(collection: CollectionName, token: Token)]) async throws

    /// The bakes recorded, oldest first.
    func bakes() async throws -> [BakedSnapshot]

    /// The newest position committed at or before `date`, to the second (0 when none).
    func position(committedBefore date: Date) async throws -> UInt64

    /// Drops hidden records and superseded versions at or before a horizon of at most `position`
    /// (see `Compaction`) in one transaction, and sets the horizon; with `dryRun`, only says what it would do.
    func compact(before position: UInt64, dropBaked: Bool, dryRun: Bool) async throws -> CompactionReport

    /// Records `rules` as the database's current rules, unless they equal them: returns the
    /// version they have (the same one when equal, the next one when they differ).
    func installRules(_ rules: Rules) async throws -> UInt64

    /// The database's secret for signing read grants (docs/PROTOCOL.md, "Users' cacheable
    /// reads"): 32 random bytes made by the first caller and kept, so that every instance on one
    /// database signs and checks grants alike.
    func grantKey() async throws -> [UInt8]

    /// The mutations pushes applied to `collection` (to record `id` only, when given), oldest
    /// first, after position `after`, at most `limit`.
    func mutationLog(_ collection: CollectionName, id: String?, after: UInt64, limit: Int) async throws -> [LoggedMutation]
}

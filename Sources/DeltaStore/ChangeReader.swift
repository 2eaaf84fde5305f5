public import DeltaCore
public import DeltaRules

/// The store as a route that answers reads sees it (`ReadRoute`, `RecordRoute`, `LongPoll`,
/// snapshots, blobs' access checks): consistent reads, each in one transaction whose token
/// describes exactly the records it returns, and the rules they are read under. A backend
/// implements it as part of `ChangeStore`.
public protocol ChangeReader: Sendable {
    /// The database's random identity, carried in every token it issues.
    var databaseID: UInt64 { get }

    /// Opens a consistent read of `collection`: a full dataset, a delta since a token, or a
    /// verdict; with a `client`, also that client's last mutation id, read in the same
    /// transaction, so the client knows which of its pushed writes the data already contains.
    func read(_ collection: CollectionName, since: Since, client: String?) async throws -> (result: ReadResult, lastMutation: UInt64?)

    /// Opens a consistent read of `collection` for a selection (see `SelectionFeed`): the same
    /// verdict as `read`, then a source over the same transaction; a delta from before the
    /// history the database keeps of superseded versions is rejected as `expired`.
    func openSelectionRead(_ collection: CollectionName, since: Since, client: String?) async throws -> (start: SelectionStart, lastMutation: UInt64?)

    /// What `read` would answer, without its records: a `304` or a rejection, or the token and
    /// digest a feed would have (`.stream`); with a `client`, its last mutation id from the same
    /// snapshot. For answers that only name where a read ends (the `307` to a cacheable read, a
    /// kept answer). The changed records are not counted, so its mode is `.delta` where `read`
    /// may answer the full dataset instead (`ReadVerdict.decide`).
    func verdict(_ collection: CollectionName, since: Since, client: String?) async throws -> (verdict: ReadVerdict, lastMutation: UInt64?)

    /// The record `id` of `collection`, hidden ones too, with the commit that last changed it.
    func record(_ id: String, in collection: CollectionName) async throws -> StoredRecord?

    /// The principal push client `client` belongs to, as `PushLedger.owner(client:)` reads it:
    /// a pull's `Delta-Last-Mutation` is answered to that principal only. An owner, once
    /// recorded, never changes, so a read after the pull's own sees the owner of every client
    /// whose mutations that pull saw.
    func owner(ofClient client: String) async throws -> String?

    /// Opens one read transaction over the full datasets of `collections` (for a snapshot):
    /// every collection's token and count, and its records, describe the same moment.
    func openFullRead(_ collections: [CollectionName]) async throws -> any FullRead

    /// The newest committed position of the whole database (0 when empty).
    func headPosition() async throws -> UInt64

    /// Opens one read transaction of `collection` for a user: never a `304` from the collection
    /// alone (the rows a rule gives can change when another collection changes); a delta from
    /// before the history kept is `expired`. With a `client`, its last mutation id too.
    func openRuleRead(_ collection: CollectionName, since: Since, client: String?) async throws -> (start: RuleReadStart, lastMutation: UInt64?)

    /// `openRuleRead` for a caller that will ask the source for nothing but a delta's changed
    /// records and the rules version (a rule without `$rows` sources, no limit, no grant). A
    /// backend whose first statement then holds the whole read may answer from it alone, without
    /// opening a transaction; asked for more, such a source throws rather than read another
    /// snapshot. Every other backend keeps the default, `openRuleRead`.
    func openRuleChanges(_ collection: CollectionName, since: Since, client: String?) async throws -> (start: RuleReadStart, lastMutation: UInt64?)

    /// The version of the rules the database holds now (0: none installed): one cheap read, which
    /// a server that follows the database's rules (`deltasnap rules install`) asks often.
    func currentRulesVersion() async throws -> UInt64

    /// The rules the database holds now, nil when none were ever installed.
    func currentRules() async throws -> StoredRules?

    /// Notes that this process now reads under `rules`, which another one installed
    /// (`installRules` made their key indexes): reads of their `$rows` sources use the key
    /// indexes the database has for them, as after `installRules` in this process.
    func followRules(_ rules: Rules) async throws

}

extension ChangeReader {
    /// Opens a consistent read of `collection` for a reader that does not push.
    public func read(_ collection: CollectionName, since: Since) async throws -> ReadResult {
        try await read(collection, since: since, client: nil).result
    }
}

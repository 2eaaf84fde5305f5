public import DeltaCore
public import DeltaRules

/// A record as the store holds it, with the position that last changed it.
public struct StoredRecord: Sendable, Equatable {
    /// The record (`hidden` when it is a tombstone).
    public let record: Record
    /// The token of the commit that last changed it: its position and that commit's tag.
    public let token: Token
    /// The client whose push wrote this version, when a push did.
    public let writer: String?

    /// Creates a stored record.
    public init(record: Record, token: Token, writer: String?) {
        self.record = record
        self.token = token
        self.writer = writer
    }

    /// The record's strong `ETag` (`GET /api/{collection}/{id}`): its version's token, unweakened.
    public var entityTag: String { String(token.entityTag.dropFirst(2)) }
}

/// The answers recorded for one run of a client's mutations (one commit's worth).
public struct RecordedRun: Sendable, Equatable {
    /// The first mutation id of the run; the others follow without gaps.
    public let first: UInt64
    /// Each mutation's digest, 32 bytes each, in order.
    public let digests: [UInt8]
    /// The answers, as a canonical JSON array of results, in order.
    public let results: [UInt8]

    /// Creates a run.
    public init(first: UInt64, digests: [UInt8], results: [UInt8]) {
        self.first = first
        self.digests = digests
        self.results = results
    }

    /// How many mutations the run holds.
    public var count: Int { digests.count / 32 }
}

/// What a push needs from a write transaction besides writing: the current version of a
/// record, and the client's mutation log, read and written in the same transaction as the
/// records, so "applied" and "recorded as applied" commit together. `WriteTransaction` refines
/// it, so every backend's write transaction has it.
public protocol PushLedger: Sendable {
    /// The record `id` of the transaction's collection as the transaction sees it, or nil.
    func stored(_ id: String) async throws -> StoredRecord?
    /// Whether `token` names a commit this database holds (its database, and the tag at its position).
    func holds(_ token: Token) async throws -> Bool
    /// The highest mutation id recorded for `client` (0 for a client never seen).
    func lastMutation(client: String) async throws -> UInt64
    /// The recorded run of `client`'s mutations that holds mutation `id`, or nil when none is kept.
    func recorded(client: String, containing id: UInt64) async throws -> RecordedRun?
    /// Writes `record`, which the caller has just read (`stored`: `replacing`, nil when there was
    /// none) and knows differs, in a transaction that writes no id twice (a push's groups): what
    /// `upsert` does without reading the record again.
    func put(_ record: Record, replacing: Record?) async throws
    /// Marks this commit's version of `recordID` as written by `client`'s push.
    func markWritten(_ recordID: String, by client: String) async throws
    /// Records a run of `client`'s new mutations with their answers, and makes its last id the client's last.
    func record(client: String, _ run: RecordedRun) async throws
    /// Drops the runs kept for `client` that end before `id`: a push starting at `id` shows the
    /// client heard them.
    func forget(client: String, before id: UInt64) async throws
    /// Offers `visit` each visible body of `collection` as this transaction sees it (for rules
    /// that read another collection's rows, `$rows`), one at a time: the bytes are valid only
    /// during the call. With a `key`, a backend may leave out rows whose key member is not
    /// that string (their source's filter would not match them).
    func forEachBody(of collection: CollectionName, key: RowsKey?, _ visit: (UnsafeRawBufferPointer) throws -> Void) async throws
    /// The version of the rules the database holds, as this transaction sees it (0: none).
    func rulesVersion() async throws -> UInt64
    /// The principal `client` belongs to (`Principal.ledgerName`): the first that pushed with it;
    /// nil when none has, or when only the owner or the client key did, before principals were
    /// recorded (a user's, recorded then as the bare `sub`, reads `user:` and the `sub`).
    func owner(client: String) async throws -> String?
    /// Makes `principal` (`Principal.ledgerName`) the owner of `client`, which has none.
    func claim(client: String, for principal: String) async throws
    /// Records that `user` (nil: an app or the owner) applied mutation `mutation` of `client`
    /// (`put` or `delete`) to `recordID`, at this transaction's commit (`deltasnap log`).
    func log(_ recordID: String, user: String?, client: String, mutation: UInt64, operation: String) async throws
}

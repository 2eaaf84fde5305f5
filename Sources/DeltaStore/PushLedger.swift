public import DeltaCore

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

/// What a push needs from a write transaction besides writing: the current version of a
/// record, and the client's mutation log, read and written in the same transaction as the
/// records, so "applied" and "recorded as applied" commit together. Both backends' write
/// transactions conform.
public protocol PushLedger: Sendable {
    /// The record `id` of the transaction's collection as the transaction sees it, or nil.
    func stored(_ id: String) async throws -> StoredRecord?
    /// Whether `token` names a commit this database holds (its database, and the tag at its position).
    func holds(_ token: Token) async throws -> Bool
    /// The highest mutation id recorded for `client` (0 for a client never seen).
    func lastMutation(client: String) async throws -> UInt64
    /// The digest and the answer recorded for mutation `id` of `client`, or nil when none is kept.
    func recorded(client: String, mutation id: UInt64) async throws -> (digest: [UInt8], result: [UInt8])?
    /// Records mutation `id` of `client` as answered with `result`, and, when the mutation wrote
    /// `recordID`, marks this commit's version of it as the client's.
    func record(client: String, mutation id: UInt64, digest: [UInt8], result: [UInt8], wrote recordID: String?) async throws
    /// Makes `id` the client's last mutation id (once per transaction, after its mutations are recorded).
    func setLastMutation(client: String, _ id: UInt64) async throws
    /// Drops the answers kept for `client`'s mutations before `id`: a push starting at `id` shows
    /// the client heard them.
    func forget(client: String, before id: UInt64) async throws
}

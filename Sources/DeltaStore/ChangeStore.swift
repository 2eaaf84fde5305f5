public import DeltaCore

/// The server's change log: records keyed by (collection, id), one commit position per write.
///
/// Its roles: `ChangeReader` (reads), `ChangeWriter` (writes and pushes), `StoreAdministration`
/// (rules, bakes, compaction, the log), `StoreInspection` (the console) and `BlobStore` (files); a route or a command asks for the
/// role it uses, and a backend implements them all.
///
/// Every write transaction takes the next position of one monotonic counter and stamps every
/// record it changes with it. A read computes its answer and its token inside one read
/// transaction, so the token describes exactly the data returned. Backends: `SQLiteStore` in `DeltaSQLiteStore`
/// (embedded, the default) and `PostgresStore` in `DeltaPostgres` (several servers, one database).
/// Nothing above this protocol knows which.
public protocol ChangeStore: ChangeReader, ChangeWriter, StoreAdministration, StoreInspection, BlobStore {
    /// Releases the store's resources; reads and writes after this fail.
    func close() async throws

    /// Whether the store's calls never block their thread: PostgreSQL's network I/O runs on
    /// SwiftNIO event loops, so the server runs each connection's requests on its event loop
    /// (`EventLoopExecutor`), where the store's answers arrive. SQLite's calls block on the
    /// disk, and stay off event loops.
    var runsOnEventLoops: Bool { get }
}

extension ChangeStore {
    /// False: a store's calls may block (SQLite).
    public var runsOnEventLoops: Bool { false }
}
/// What a read starts from.
public enum Since: Sendable, Equatable {
    /// Nothing: the full dataset (visible records only).
    case nothing
    /// A token from an `ETag` (`If-None-Match`): checked against this database and its commits.
    case token(Token)
    /// A position from a `Last-Modified` date (`If-Modified-Since` alone): checked against the range held.
    case position(UInt64)
}

/// The answer to a read.
public enum ReadResult: Sendable {
    /// Nothing in the collection changed after the position asked for: the collection's current
    /// token, and its state digest there.
    case notModified(Token, StateDigest)
    /// The token cannot be honoured exactly; the client must reset.
    case rejected(TokenRejection)
    /// Records to send, streamed from the open read transaction.
    case changes(any ChangeFeed)
}

/// Whether a feed carries the whole dataset or the changes after a position.
public enum FeedMode: Sendable, Equatable {
    /// Every visible record, sorted by id.
    case full
    /// Every record changed after `position` (hidden ones included), in commit order.
    case delta(since: UInt64)
}

/// Records streamed out of one open read transaction. Call `close()` when done (idempotent).
public protocol ChangeFeed: AnyObject, Sendable {
    /// The token describing exactly the data this feed returns.
    var token: Token { get }
    /// The state digest at `token`: of the whole collection, or of the selection a selection's feed answers.
    var digest: StateDigest { get }
    /// Full dataset or delta.
    var mode: FeedMode { get }
    /// The next records (at most about `maximumBytes` of bodies), or nil at the end.
    func next(maximumBytes: Int) async throws -> RecordBatch?
    /// Ends the read transaction and returns its connection; safe to call more than once.
    func close()
}

/// The full datasets of several collections, read inside one read transaction. Call `close()` when done.
public protocol FullRead: AnyObject, Sendable {
    /// Each collection asked for, in order: its token, how many visible records it has, and its state digest.
    var collections: [(name: CollectionName, token: Token, records: Int, digest: StateDigest)] { get }
    /// The next visible records of `collection`, sorted by id (at most about `maximumBytes`), nil at its end.
    /// Collections are read one after the other, in the order they were asked for.
    func next(_ collection: CollectionName, maximumBytes: Int) async throws -> RecordBatch?
    /// Ends the read transaction; safe to call more than once.
    func close()
}

/// The writes of one commit, on one collection, and what a push reads and records in the same
/// transaction (`PushLedger`): every backend's transaction takes pushes, the compiler checks it.
public protocol WriteTransaction: PushLedger {
    /// Inserts or replaces a record; `record.hidden` sets its hidden state. What changed is
    /// counted in the `CommitResult`. A backend may send upserts to its database in batches, so
    /// an error about this record (its id written twice, say) can surface at a later call or at
    /// the commit; the whole transaction fails either way.
    func upsert(_ record: Record) async throws
    /// Hides the record `id`, keeping its content as a tombstone. Throws `notFound` when there is no such record.
    @discardableResult
    func hide(id: String) async throws -> Bool
    /// Hides every visible record of the collection that this transaction did not write, and
    /// returns how many: what makes an import the complete new state of the collection.
    @discardableResult
    func hideUnwritten() async throws -> Int
    /// Which of `hashes` the store holds whole, and, with a `user`, that user uploaded (proving
    /// they have the bytes: knowing a hash alone must not let a user reference a blob to read
    /// it). They stay held until this transaction ends: compaction cannot drop one between this
    /// check and the commit of a record that references it. Every `upsert` keeps which blobs the
    /// record's current version references (`Record.blobReferences()`), whoever writes it; this is
    /// how a write refuses a reference to a blob that is not there.
    func heldBlobs(_ hashes: [BlobHash], uploadedBy user: String?) async throws -> Set<BlobHash>
}

/// What a write transaction did.
public struct CommitResult: Sendable, Equatable {
    /// The collection's token after the transaction (unchanged when nothing changed).
    public let token: Token
    /// Whether a new position was committed.
    public let committed: Bool
    /// Records inserted, replaced or brought back (made visible).
    public let upserted: Int
    /// Records hidden (whether newly written hidden or hidden in place).
    public let hidden: Int
    /// Writes that changed nothing.
    public let unchanged: Int

    /// Creates a result.
    public init(token: Token, committed: Bool, upserted: Int, hidden: Int, unchanged: Int) {
        self.token = token
        self.committed = committed
        self.upserted = upserted
        self.hidden = hidden
        self.unchanged = unchanged
    }
}

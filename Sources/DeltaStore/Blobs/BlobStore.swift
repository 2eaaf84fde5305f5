public import DeltaCore

/// A blob the store holds: its name, length and media type.
public struct StoredBlob: Sendable, Equatable {
    /// Its name (the SHA-256 of its bytes).
    public let hash: BlobHash
    /// Its length in bytes.
    public let size: Int64
    /// The media type it was first uploaded with.
    public let type: String

    /// Creates a description.
    public init(hash: BlobHash, size: Int64, type: String) {
        self.hash = hash
        self.size = size
        self.type = type
    }

    /// The reference a record puts in a member to name this blob.
    public var reference: BlobReference { BlobReference(hash: hash, size: size, type: type) }
}

/// A row that references a blob: what decides who may read the blob.
public struct BlobReferrer: Sendable, Equatable {
    /// The row's collection.
    public let collection: CollectionName
    /// The row's visible version.
    public let record: Record

    /// Creates a referrer.
    public init(collection: CollectionName, record: Record) {
        self.collection = collection
        self.record = record
    }
}

/// Content-addressed blobs beside the records (docs/PROTOCOL.md, "Files").
///
/// A blob is stored whole or not at all: an upload is written aside while it is hashed, and
/// becomes visible only when its bytes match its name. Which rows reference a blob is kept as
/// records are written, so that reading a blob can follow the rules of those rows, a write can
/// refuse a reference to a blob the store does not hold, and compaction can drop blobs no row
/// references any more.
public protocol BlobStore: Sendable {
    /// The blob named `hash`, when it is stored whole.
    func blob(_ hash: BlobHash) async throws -> StoredBlob?

    /// Starts storing the bytes of `hash`: write them with the upload, then `finish` it. At most
    /// `maximumBytes` are accepted (`StoreError(.tooLarge)` beyond), whatever the memory. A
    /// finished upload by a user (`uploader`, their subject) records that they hold the bytes:
    /// what lets them reference the blob in a record (`WriteTransaction.heldBlobs`).
    func beginUpload(_ hash: BlobHash, type: String, maximumBytes: Int64, uploader: String?) async throws -> any BlobUpload

    /// Starts storing the bytes of `hash` as the other `beginUpload` does, resumable by `holder`
    /// (who uploads: a user, the owner, apps): `BlobUpload.suspend` keeps what was written for
    /// them, for a day. With an `offset` above 0, continues what is kept: those bytes count (they
    /// are hashed again) and the bytes written next follow them. An `offset` that is not what is
    /// kept throws `StoreError(.uploadOffset)` with `keptBytes`, and changes nothing.
    func beginUpload(
        _ hash: BlobHash, type: String, maximumBytes: Int64, uploader: String?, holder: String, offset: Int64
    ) async throws -> any BlobUpload

    /// How many bytes of an upload of `hash` by `holder` are kept (`BlobUpload.suspend`): where
    /// its resumption starts. 0 when none are.
    func keptUpload(_ hash: BlobHash, holder: String) async throws -> Int64

    /// Opens `range` of the blob's bytes (clamped to its size), nil when it is not stored.
    func openBlob(_ hash: BlobHash, range: Range<Int64>) async throws -> (any BlobReading)?

    /// Up to `limit` visible rows that reference `hash`, in `collections` only when given: what
    /// a read of the blob is allowed by.
    func referrers(of hash: BlobHash, in collections: [CollectionName]?, limit: Int) async throws -> [BlobReferrer]

    /// Whether `hash` is stored whole and, with a `user`, that user uploaded it: what lets a
    /// conditional upload (`If-None-Match: *`) be answered without its bytes.
    func holds(_ hash: BlobHash, uploadedBy user: String?) async throws -> Bool

    /// How many blobs are stored, and their bytes.
    func blobTotals() async throws -> (blobs: Int, bytes: Int64)

    /// The blob `hash` when a visible row of one of `collections` (nil: of any) references it:
    /// a public read's check and its blob in one look (one round trip on PostgreSQL).
    func referencedBlob(_ hash: BlobHash, in collections: [CollectionName]?) async throws -> StoredBlob?
}

extension BlobStore {
    /// The referrers, then the blob: two looks, cheap for an embedded store.
    public func referencedBlob(_ hash: BlobHash, in collections: [CollectionName]?) async throws -> StoredBlob? {
        guard try await !referrers(of: hash, in: collections, limit: 1).isEmpty else { return nil }
        return try await blob(hash)
    }
}

/// One upload in progress: bytes in order, then `finish` or `cancel`.
public protocol BlobUpload: AnyObject, Sendable {
    /// Appends bytes, hashing them; throws `StoreError(.tooLarge)` past the limit.
    func write(_ bytes: [UInt8]) async throws
    /// Checks the bytes hash to the name (`StoreError(.blobHash)` when not), makes the blob
    /// visible durably, and returns it. A blob already stored whole is returned as stored.
    func finish() async throws -> StoredBlob
    /// Drops what was written; nothing becomes visible. Safe to call after `finish` or twice.
    func cancel() async
    /// Ends an upload whose bytes stopped coming (the connection closed): what was written is
    /// kept for its holder to resume, or dropped as by `cancel` when it has none. The kept bytes
    /// may be fewer than were written (PostgreSQL keeps whole parts); `BlobStore.keptUpload`
    /// says how many.
    func suspend() async
}

extension StoreError {
    /// A resumption of the upload of `hash` at `offset` where the store kept `kept` bytes.
    package static func uploadOffset(_ hash: BlobHash, offset: Int64, kept: Int64) -> StoreError {
        var error = StoreError(
            .uploadOffset, "blob \(hash)", "the upload cannot resume there: the server kept another number of its bytes",
            evidence: "asked to resume at \(offset), \(kept) kept")
        error.keptBytes = kept
        return error
    }
}

/// The name a kept upload goes by in a store: its holder's digest (so that any holder name is
/// safe in a path or a key), then the blob's hash.
package func keptUploadName(_ hash: BlobHash, holder: String) -> String {
    "kept-" + BlobHash.of(Array(holder.utf8)).hex.prefix(16) + "-" + hash.hex
}

/// A range of a stored blob, read in order.
public protocol BlobReading: AnyObject, Sendable {
    /// The blob.
    var blob: StoredBlob { get }
    /// The next bytes (at most `maximumBytes`), nil after the range's end.
    func next(maximumBytes: Int) async throws -> [UInt8]?
    /// Releases the reading; safe to call more than once.
    func close()
    /// The local file holding the blob's bytes at their offsets, when the store keeps them in
    /// one (SQLite's blob directory): a server may send the range from it directly, without
    /// copying the bytes through `next`. Nil when the bytes must be read with `next`.
    var localFile: String? { get }
}

extension BlobReading {
    /// None: the bytes are read with `next`.
    public var localFile: String? { nil }
}

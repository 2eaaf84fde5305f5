import DeltaCore
import Foundation

/// How a replica finds its files and its server, with defaults that suit an app.
public struct ReplicaConfiguration: Sendable {
    /// How thoroughly the local store is checked when it is opened.
    public enum IntegrityCheck: Sendable {
        /// `PRAGMA quick_check`: every page and row, without cross-checking indexes (the default).
        case quick
        /// `PRAGMA integrity_check`: everything SQLite can check; then every collection's records
        /// are hashed again and compared with its stored state digest, which finds a record
        /// changed behind the replica's back even if no answer has touched it since.
        case full
        /// No check (the store is still rebuilt when SQLite cannot open it).
        case none
    }

    /// The local SQLite store; created on first open.
    public var storeURL: URL
    /// The bundled snapshot (`deltasnap bake`): installed on first open and on every reset.
    public var snapshotURL: URL
    /// The server's API root: the collection's name is appended, as in `http://HOST:8080/api`.
    public var serverURL: URL
    /// The key the server gives apps for pushes (`deltasnap serve --client-key`), sent as
    /// `Authorization: Bearer`; nil: local writes are kept and pushed once a key is configured.
    public var clientKey: String?
    /// The signed-in user's JSON Web Token, for a server with rules (docs/PROTOCOL.md, "Users
    /// and rules"): asked before the first request that needs it and once more after the server
    /// answers `401 token-expired`; pulls, long-polls and pushes carry it (pushes instead of the
    /// client key). Return nil when nobody is signed in. Without it, public collections only.
    public var credentials: (@Sendable () async throws -> String?)?
    /// Where pushes go. Default: `push` beside the API root (`http://HOST:8080/api` → `http://HOST:8080/push`).
    public var pushURL: URL?
    /// The most mutations sent in one push request: memory is bounded by this, not by the queue.
    public var pushBatchSize = 5_000
    /// The subset of each collection to hold, by collection name (docs/PROTOCOL.md, "Selections"):
    /// the visible records that match a filter, and of those the first `limit` in id order.
    /// A collection not named here is held whole. Changing a collection's selection resets that
    /// collection alone, at the next open.
    public var selections: [String: Selection] = [:]
    /// Members to index per collection, so that `query` with `eq` or `in` on them reads only the
    /// matching rows instead of the whole collection, and a limited query ordered by one of them
    /// reads about `limit` rows in the index's order. Created at open (once; large collections
    /// take a while); nil leaves the store's indexes as they are, an empty map drops them all.
    public var indexes: [String: [String]]?
    /// Compound indexes per collection, each on two different members in order: `["category",
    /// "price"]` lets a query that requires one category (an `eq`, or an `in` of one value, alone
    /// or in an `and`) and is ordered by price, with a limit, read just the rows it returns
    /// (`query(filter: category eq …, order: price, limit: 20)`), in SQLite's index order.
    /// Created at open; nil leaves the store's compound indexes as they are, an empty map drops
    /// them all.
    public var compoundIndexes: [String: [[String]]]?
    /// Members that full-text `search` looks in, per collection; an empty list makes all the
    /// collection's top-level string members searchable, and `search` on a collection not named
    /// here throws. nil leaves the store's search index as it is; a collection no longer named
    /// loses its index.
    public var searchable: [String: [String]]?
    /// How long one request may wait for data before it counts as a network failure.
    public var requestTimeout: TimeInterval = 60
    /// How the store is checked when opened.
    public var integrityCheck: IntegrityCheck = .quick
    /// The first back-off after a failed sync; it doubles with each failure in a row.
    public var initialBackoff: TimeInterval = 1
    /// The longest back-off, unless the server's `Retry-After` asks for more.
    public var maximumBackoff: TimeInterval = 300

    /// Creates a configuration with the default timeouts, check and back-off.
    public init(storeURL: URL, snapshotURL: URL, serverURL: URL) {
        self.storeURL = storeURL
        self.snapshotURL = snapshotURL
        self.serverURL = serverURL
    }

    /// The URL of `GET /api/{collection}`, with the collection's selection as `filter` and `limit`.
    func url(of collection: String) -> URL {
        let url = serverURL.appendingPathComponent(collection)
        guard let selection = selections[collection], !selection.isEverything,
            var components = URLComponents(url: url, resolvingAgainstBaseURL: false)
        else { return url }
        components.percentEncodedQuery = selection.query
        return components.url ?? url
    }

    /// The selection configured for `collection` (the whole collection when none is).
    func selection(of collection: String) -> Selection { selections[collection] ?? .everything }

    /// When blobs are downloaded, per collection: `.lazy` (on first access, the default) or
    /// `.eager` (with the sync that brings the references).
    public var blobDownloads: [String: BlobDownloads] = [:]
    /// The most bytes of blobs kept that the server also holds (nil: no limit); beyond it the
    /// least recently used go, and are downloaded again when asked for. Blobs not uploaded yet
    /// are always kept, and never counted out.
    public var blobCacheBytes: Int64?

    /// The URL of `PUT` and `GET /blobs/{sha256}` for `hash`: beside `/push`.
    func blobURL(_ hash: BlobHash) -> URL {
        resolvedPushURL.deletingLastPathComponent().appendingPathComponent("blobs").appendingPathComponent(hash.hex)
    }

    /// The URL of `POST /push`.
    var resolvedPushURL: URL {
        pushURL ?? serverURL.deletingLastPathComponent().appendingPathComponent("push")
    }

    /// The back-off after `failures` failures in a row: `initialBackoff` doubled each time, at most `maximumBackoff`.
    public func backoff(afterFailures failures: Int) -> TimeInterval {
        min(maximumBackoff, initialBackoff * pow(2, Double(max(0, failures - 1))))
    }
}

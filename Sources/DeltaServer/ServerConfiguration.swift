public import DeltaCore
public import DeltaStore

/// How `deltasnap serve` runs, with defaults that are safe to expose.
public struct ServerConfiguration: Sendable {
    /// The address to bind. Default `127.0.0.1`: loopback only, unless told otherwise.
    public var host = "127.0.0.1"
    /// The TCP port. Default 8080; 0 picks a free port.
    public var port = 8080
    /// The bearer secret that writes must present; nil makes the server read-only. Default nil.
    public var writeToken: String?
    /// The key apps present to push (`POST /push`) and to make conditional writes; nil: apps
    /// cannot write. Default nil.
    public var clientKey: String?
    /// The collections apps may write with the client key. Default none.
    public var clientWritable: Set<String> = []
    /// The largest request body accepted, in bytes. Default 32 MiB.
    public var maximumBodyBytes = 32 << 20
    /// This instance's copies of blobs the database holds (`--blob-cache`), sent with `sendfile`
    /// after the first download; nil: every download reads the store.
    public var blobCache: BlobFileCache?
    /// The largest blob `PUT /blobs/{sha256}` stores (`--max-blob-size`). Default 256 MiB.
    public var maximumBlobBytes: Int64 = 256 << 20
    /// The gzip level for `Accept-Encoding: gzip` responses. Default 6, as `gzip -6`.
    public var gzipLevel: Int32 = 6
    /// How many bytes of records are read from the store per write to the socket. Default 64 KiB.
    public var chunkBytes = 64 << 10
    /// How long an idle connection stays open. Default 60 s.
    public var idleTimeout: Duration = .seconds(60)
    /// The longest `?wait=` honoured, in seconds (longer asks wait this long). Default 30, under
    /// the idle timeout and the 60 s that many proxies allow an answer.
    public var maximumWait = 30
    /// The most requests held by `?wait=` at once; more get `503` with `Retry-After: 1`. Default 1,000.
    public var maximumWaiting = 1_000
    /// The directory whose `*.snapshot` files `GET /snapshots/{sha256}` serves; nil: none. Default nil.
    public var snapshotDirectory: String?

    /// Whether a conditional read that sends `Delta-Redirect` is answered with a `307` to its
    /// cacheable read (`?since=&until=`) instead of the changes, so that an HTTP cache in front of
    /// the server serves each answer once to every client at the same token. Default false: turn
    /// it on when a cache (nginx, Varnish, a CDN) is in front; cacheable reads are served either way.
    public var cacheableReads = false
    /// The most bytes of answers the server keeps in memory to send again (`AnswerCache`):
    /// cacheable reads, and a public collection's plain reads from the same token; 0: none.
    /// Default 64 MiB, each answer at most an eighth of it.
    public var answerCacheBytes = 64 << 20

    /// Verifies users' JSON Web Tokens (`--jwt-secret`, `--jwks`); nil: no user tokens. Default nil.
    public var authenticator: Authenticator?
    /// The rules (`--rules`) as installed in the database, with their version; nil: no users'
    /// rules, every collection public as before. Default nil. With `liveRules`, each request sees
    /// here the version `liveRules` held when it started.
    public var rules: StoredRules?
    /// The database's rules, followed as they change (`deltasnap rules install`, or another
    /// instance started with another file): each request is decided under the version held when
    /// it starts, and `runServer` follows the database's newest within a second. nil: `rules`
    /// stay as given, and a database that moved on is answered `503 rules-mismatch`. Default nil.
    public var liveRules: LiveRules?
    /// Signs users' cacheable reads (`--cacheable-reads` with `--rules`): a user's conditional
    /// read that changed is sent, with a `307`, to the cacheable read of the rows their rule
    /// gives, shared by every user it gives the same rows. nil: users' reads are answered
    /// directly. Default nil.
    public var readGrants: ReadGrants?

    /// The web origins whose pages may call the API from a browser (`--allow-origin`, CORS); nil:
    /// none, and no answer carries a CORS header. Default nil.
    public var crossOrigin: CrossOrigin?

    /// Whether the operator's console is served at `/console/` (`--console`), signed in with
    /// `writeToken`, which it needs. Default false.
    public var console = false

    /// The defaults.
    public init() {}

    /// The size limit on a record's canonical bytes that follows from `maximumBodyBytes`.
    public var recordSize: RecordSize { RecordSize(bodyLimit: maximumBodyBytes) }

    /// This configuration with `rules` as `liveRules` holds them now (itself without
    /// `liveRules`): what one request is decided under, from its start to its end.
    func pinned() -> ServerConfiguration {
        guard let liveRules else { return self }
        var pinned = self
        pinned.rules = liveRules.current
        return pinned
    }

    /// After a transaction found the database under other rules than `rules`: this configuration
    /// under the database's rules, read from it now; nil when they are the same version, or when
    /// the rules do not follow the database (no `liveRules`).
    func repinned(_ store: any ChangeReader) async throws -> ServerConfiguration? {
        guard let liveRules else { return nil }
        let newer = try await liveRules.refresh(from: store)
        guard newer.version != rules?.version else { return nil }
        var pinned = self
        pinned.rules = newer
        return pinned
    }
}

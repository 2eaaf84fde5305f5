import ArgumentParser
import DeltaCore
import DeltaServer
import DeltaStore
import Foundation
import Logging

/// `deltasnap serve`: the HTTP delta server.
struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run the HTTP delta server.",
        discussion: """
            Serves GET /api/<collection> (full dataset or delta, 304, 409 reset signal), \
            GET /api/<collection>/<id> (one record, with its strong ETag), \
            PUT|DELETE /api/<collection>/<id> and POST /api/<collection> (the owner's writes, \
            need the write token), POST /bakes (records a baked snapshot's token, so compact keeps it; \
            the write token), POST /push (apps' queued writes, need the client key), \
            PUT|GET|HEAD /blobs/<sha256> (files beside records: photos, PDFs; a record names one \
            with {"$blob": "<sha256>", "size": N, "type": "image/jpeg"}), \
            GET /healthz and GET /metrics (Prometheus text).

            Binds to 127.0.0.1 unless --host says otherwise. Without a write token the server is \
            read-only. Prefer DELTASNAP_WRITE_TOKEN to --write-token: command lines are visible to \
            other users of the machine. Stops gracefully on SIGTERM or SIGINT.

            Apps that write offline push with the client key, only to the collections named by \
            --client-writable; their PUT and DELETE must carry If-Match (428 without, 412 when \
            stale). The key ships inside apps, so treat it as public-ish: it grants exactly those \
            collections, never the owner's unconditional writes:
              DELTASNAP_CLIENT_KEY=app-key-123 deltasnap serve --client-writable notes,todos

            Behind an HTTP cache (nginx proxy_cache, Varnish, a CDN), add --cacheable-reads: a \
            client's conditional read that changed is answered with a 307 to \
            /api/<collection>?since=<its token>&until=<current token>, an answer that never \
            changes (Cache-Control: public, immutable), so the cache computes each day's delta once \
            for every app at the same token. docs/PROTOCOL.md, "Cacheable reads", has the settings.

            Users sign in with JSON Web Tokens (Authorization: Bearer <JWT>), verified with \
            --jwks (ES256, EdDSA, RS256) and/or --jwt-secret (HS256); --rules says per collection \
            which rows each user reads and writes, and every collection it does not name becomes the \
            owner's alone. Try it with a development token from `deltasnap token`:
              DELTASNAP_JWT_SECRET=... deltasnap serve --rules rules.json
            The database holds the rules (--rules installs a file that differs): every server on \
            it follows the newest version within a second, so `deltasnap rules install` changes \
            them without a restart; without --rules, a server that verifies users takes the \
            database's.

            A web app on another origin calls the API from the browser once that origin is \
            allowed (CORS); '*' lets any page make public reads only, without credentials:
              deltasnap serve --allow-origin https://app.example.com --allow-origin '*'
            Serving the web app and the API from one origin (a reverse proxy) needs none.

            Several servers can share one PostgreSQL database behind a load balancer; a token \
            from one is honoured by all of them:
              PGPASSWORD=... deltasnap serve --db postgres://deltasnap@db.internal/deltasnap

            --console serves the operator's console at /console/ in a browser: each collection's \
            records and every version of one (with the user and client that pushed it), what a \
            user reads and may write and why, the latest pushes, this server's last hour of \
            requests; and it hides records, compacts, installs rules and bakes snapshots. Sign in \
            with the write token; the session is a cookie of this server's:
              DELTASNAP_WRITE_TOKEN=... deltasnap serve --console    # then open http://127.0.0.1:8080/console/
            """
    )

    @Option(help: ArgumentHelp(Database.help, valueName: "database"))
    var db = "deltasnap.sqlite"

    @Option(help: ArgumentHelp("The address to bind: 127.0.0.1 (loopback) by default, 0.0.0.0 for every interface.", valueName: "address"))
    var host = "127.0.0.1"

    @Option(help: ArgumentHelp("The TCP port; 0 picks a free one (printed on start).", valueName: "port"))
    var port = 8080

    @Option(help: ArgumentHelp("The bearer secret writes must present (default: $DELTASNAP_WRITE_TOKEN; none = read-only).", valueName: "secret"))
    var writeToken: String?

    @Option(help: ArgumentHelp("The bearer key apps present to push (default: $DELTASNAP_CLIENT_KEY; none = apps cannot write).", valueName: "key"))
    var clientKey: String?

    @Option(help: ArgumentHelp("Comma-separated collections apps may write with the client key.", valueName: "a,b"))
    var clientWritable: String?

    @Option(
        help: ArgumentHelp(
            "The largest request body accepted, in bytes (at least 4096). A record may have this less 1 KiB once written canonically.", valueName: "bytes"))
    var maxBodyBytes = 32 << 20

    @Option(
        help: ArgumentHelp("The longest ?wait= a live client's request is held, in seconds (keep it under your proxies' read timeout).", valueName: "seconds"))
    var maxWait = 30

    @Option(help: ArgumentHelp("The most requests held by ?wait= at once; more get 503 with Retry-After.", valueName: "count"))
    var maxWaiting = 1_000

    @Option(
        help: ArgumentHelp(
            "A directory of baked snapshots to serve by content: GET /snapshots/{sha256} (immutable) and /snapshots/current/{collection}.", valueName: "dir"))
    var snapshots: String?

    @Option(
        help: ArgumentHelp(
            "Where a SQLite database keeps blobs (PUT/GET /blobs/{sha256}); default: the --db path with -blobs appended. PostgreSQL keeps them in the database.",
            valueName: "dir"))
    var blobs: String?

    @Option(help: ArgumentHelp("The largest blob an upload may store: bytes, or with KiB, MiB or GiB.", valueName: "size"))
    var maxBlobSize = "256MiB"

    @Option(
        help: ArgumentHelp(
            "With PostgreSQL: keep copies of downloaded blobs in this local directory and send them from there with sendfile (each copy checked against its hash first; access is still decided by the database). SQLite keeps blobs in files already.",
            valueName: "dir"))
    var blobCache: String?

    @Option(help: ArgumentHelp("The most bytes --blob-cache keeps (least recently used copies go first).", valueName: "size"))
    var blobCacheSize = "1GiB"

    @Flag(help: "Answer conditional reads that send Delta-Redirect with a 307 to their cacheable ?since=&until= URL (use behind an HTTP cache).")
    var cacheableReads = false

    @Option(
        help: ArgumentHelp(
            "Memory for answers sent again without a database read, in MiB (0: none): cacheable reads, and a public collection's plain reads from the same token.",
            valueName: "MiB"))
    var answerCacheMb = 64

    @Option(
        help: ArgumentHelp(
            "A web origin (https://app.example.com) whose pages may call the API from a browser (CORS); repeat for more. '*': any page, public reads only.",
            valueName: "origin"))
    var allowOrigin: [String] = []

    @Flag(
        help:
            "Serve the operator's console at /console/: collections, records and their history, users' rows, pushes, compaction and rules, in a browser. Sign in with the write token; bind to a private address or put it behind TLS."
    )
    var console = false

    @OptionGroup(title: "Users")
    var users: UserOptions

    @Option(help: ArgumentHelp("Log level: trace, debug, info, notice, warning, error, critical.", valueName: "level"))
    var logLevel = "info"

    func validate() throws {
        guard (0...65535).contains(port) else { throw ValidationError("--port must be between 0 and 65535 (got \(port))") }
        guard maxBodyBytes >= 4_096 else { throw ValidationError("--max-body-bytes must be at least 4096 (got \(maxBodyBytes))") }
        guard (0...55).contains(maxWait) else { throw ValidationError("--max-wait must be 0 to 55 seconds, under the 60 s idle timeout (got \(maxWait))") }
        guard (0...65_536).contains(answerCacheMb) else { throw ValidationError("--answer-cache-mb must be 0 to 65536 (got \(answerCacheMb))") }
        guard maxWaiting >= 0 else { throw ValidationError("--max-waiting must not be negative (got \(maxWaiting))") }
        guard let blobLimit = byteCount(maxBlobSize), blobLimit > 0 else {
            throw ValidationError("--max-blob-size must be a positive size such as 256MiB, 1GiB or 1048576 (got \(maxBlobSize))")
        }
        guard let cacheBudget = byteCount(blobCacheSize), cacheBudget > 0 else {
            throw ValidationError("--blob-cache-size must be a positive size such as 1GiB (got \(blobCacheSize))")
        }
        guard Logger.Level(rawValue: logLevel) != nil else { throw ValidationError("--log-level: unknown level \(logLevel)") }
        do { _ = try CrossOrigin(allowOrigin) } catch { throw ValidationError("\(error)") }
        if let writeToken, writeToken.count < 8 { throw ValidationError("--write-token must be at least 8 characters") }
        if let clientKey, clientKey.count < 8 { throw ValidationError("--client-key must be at least 8 characters") }
        for name in writableCollections {
            do { _ = try CollectionName(name) } catch { throw ValidationError("--client-writable: \(error)") }
        }
        if !writableCollections.isEmpty, resolvedClientKey == nil {
            throw ValidationError("--client-writable needs a client key (--client-key or DELTASNAP_CLIENT_KEY)")
        }
    }

    /// The collections named by `--client-writable`.
    private var writableCollections: [String] {
        (clientWritable ?? "").split(separator: ",").map { String($0).trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
    }

    /// The client key from the option or the environment.
    private var resolvedClientKey: String? {
        clientKey ?? ProcessInfo.processInfo.environment["DELTASNAP_CLIENT_KEY"].flatMap { $0.isEmpty ? nil : $0 }
    }

    func run() async throws {
        let level = Logger.Level(rawValue: logLevel) ?? .info
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
        let logger = Logger(label: "deltasnap")
        var configuration = ServerConfiguration()
        configuration.host = host
        configuration.port = port
        configuration.maximumBodyBytes = maxBodyBytes
        configuration.maximumWait = maxWait
        configuration.maximumWaiting = maxWaiting
        configuration.snapshotDirectory = snapshots
        configuration.maximumBlobBytes = byteCount(maxBlobSize) ?? configuration.maximumBlobBytes
        configuration.cacheableReads = cacheableReads
        configuration.crossOrigin = allowOrigin.isEmpty ? nil : try CrossOrigin(allowOrigin)
        configuration.answerCacheBytes = answerCacheMb << 20
        configuration.writeToken = writeToken ?? ProcessInfo.processInfo.environment["DELTASNAP_WRITE_TOKEN"].flatMap { $0.isEmpty ? nil : $0 }
        configuration.clientKey = resolvedClientKey
        configuration.clientWritable = Set(writableCollections)
        if let key = configuration.clientKey, key == configuration.writeToken {
            throw ValidationError("the client key must differ from the write token: apps would get the owner's rights")
        }
        if console, configuration.writeToken == nil {
            throw ValidationError("--console: the console signs in with the owner's secret: give --write-token or DELTASNAP_WRITE_TOKEN")
        }
        configuration.console = console
        let location = try Database(db)
        if let blobCache {
            guard case .postgres = location else {
                throw ValidationError("--blob-cache is for PostgreSQL: with SQLite, blobs are files already, sent with sendfile")
            }
            do { configuration.blobCache = try BlobFileCache(directory: blobCache, budget: byteCount(blobCacheSize) ?? 1 << 30) } catch {
                throw CommandFailure("--blob-cache \(blobCache): cannot create the directory (\(error.localizedDescription))")
            }
        }
        let store = try await location.open(blobDirectory: blobs)
        let database = location.description
        let host = configuration.host
        var modes = configuration.writeToken != nil ? ["writes enabled"] : ["read-only"]
        if configuration.clientKey != nil {
            modes.append("pushes to \(configuration.clientWritable.sorted().joined(separator: ",").nilIfEmpty ?? "no collection")")
        }
        if cacheableReads { modes.append("cacheable reads") }
        if console { modes.append("console at /console/") }
        if let crossOrigin = configuration.crossOrigin {
            modes.append(
                "browsers from " + (crossOrigin.origins.sorted() + (crossOrigin.anyOriginReads ? ["any origin's public reads"] : [])).joined(separator: ", "))
        }
        if let summary = try await users.apply(to: &configuration, store: store) { modes.append(summary) }
        let mode = modes.joined(separator: ", ")
        try await runServer(store: store, earlyVerdicts: store, configuration: configuration, logger: logger) { port in
            // One line on stdout that scripts and tests wait for; logs go to stderr.
            let line = "deltasnap: serving \(database) on http://\(host):\(port) (\(mode))\n"
            FileHandle.standardOutput.write(Data(line.utf8))
        }
        try await store.close()
    }
}

extension String {
    /// nil for the empty string.
    var nilIfEmpty: String? { isEmpty ? nil : self }
}

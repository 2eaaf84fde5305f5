import DeltaAuthoring
import DeltaCore
import DeltaRules
import DeltaStore
import HTTPTypes
import Hummingbird
import NIOCore
import Prometheus

/// `GET /api/{collection}`: full dataset, delta, `304`, or the reset signal (`409`).
struct ReadRoute: RulesPinned {
    let store: any ChangeReader
    /// The settings; `rules` pinned for each request (`RulesPinned`).
    var configuration: ServerConfiguration
    let metrics: ServerMetrics
    /// Requests held by `?wait=`.
    let longPoll: LongPoll
    /// Answers of cacheable reads already sent, sent again without a database read.
    let answers: AnswerCache

    /// Header names of the protocol (docs/PROTOCOL.md).
    static let deltaMode = HTTPField.Name(DeltaHeader.mode)!
    static let deltaBase = HTTPField.Name(DeltaHeader.base)!
    static let deltaReset = HTTPField.Name(DeltaHeader.reset)!
    /// A writing client's id on a pull, and the answer's last mutation id of that client.
    static let deltaClient = HTTPField.Name(DeltaHeader.client)!
    static let deltaLastMutation = HTTPField.Name(DeltaHeader.lastMutation)!
    /// The state digest at the answer's token (`StateDigest`), on every `200` and `304`.
    static let deltaDigest = HTTPField.Name(DeltaHeader.digest)!
    /// The request headers every answer depends on.
    static let vary = "Accept-Encoding, If-None-Match, If-Modified-Since, \(DeltaHeader.client)"

    /// The fields of every `304`, in order (the HTTP layer adds `Date`); the early path
    /// (`NotModifiedBeforeDecoding`) sends exactly these too.
    /// A user's token (one that carries a `UserMark`) makes them private to that user.
    static func notModifiedFields(_ token: Token, _ digest: StateDigest) -> HTTPFields {
        var headers: HTTPFields = [:]
        let isPrivate = token.selection?.user != nil
        headers[.cacheControl] = isPrivate ? "private, no-store" : "no-store"
        headers[.vary] = isPrivate ? vary + ", Authorization" : vary
        headers[.eTag] = token.entityTag
        headers[.lastModified] = token.lastModified
        headers[deltaDigest] = digest.hex
        return headers
    }

    /// Answers a `GET`; with `headOnly`, a `HEAD`: the same status and headers, no body (the read
    /// ends at once), so a live client learns that a collection changed without downloading it.
    /// With `waits` false, `?wait=` is not honoured: the answer is the one of this moment (what a
    /// wait gives at each of its ticks).
    func handle(_ request: Request, context: some RequestContext, caller: Caller, headOnly: Bool = false, waits: Bool = true) async throws -> Response {
        let collection = try collectionName(context)
        // Under rules, who asks decides what is answered (`ReadPolicy`): a cacheable read of a
        // restricted collection needs the grant of a user's `307` (ReadRoute+Grants), which names its rows.
        let policy = configuration.readPolicy
        let restricted = !policy.isPublic(collection)
        if restricted, request.uri.queryParameters[values: "grant"].first != nil, request.uri.queryParameters[values: "until"].first != nil {
            do {
                if let read = try CacheableRead(request) { return try await cacheable(read, request, collection: collection, headOnly: headOnly) }
            } catch let malformed as MalformedSince {
                throw reset(.malformed, sent: malformed.text)
            }
        }
        var reader: Claims?
        if case .rule(_, let claims) = try await policy.scope(of: collection, for: caller) { reader = claims }
        do {
            if let read = try CacheableRead(request) {
                if restricted {
                    throw Problem(
                        .forbidden, "not-public",
                        "collection \(collection): cacheable reads (?since=&until=) serve public collections only, or a user's with the grant of their 307")
                }
                return try await cacheable(read, request, collection: collection, headOnly: headOnly)
            }
        } catch let malformed as MalformedSince {
            throw reset(.malformed, sent: malformed.text)
        }
        let conditional = Conditional(request.headers)
        var headers: HTTPFields = [:]
        headers[.cacheControl] = restricted ? "private, no-store" : "no-store"
        headers[.vary] = restricted ? Self.vary + ", Authorization" : Self.vary
        let since: Since
        switch conditional.since {
        case .rejected(let rejection): throw reset(rejection, sent: conditional.base)
        case .read(let value): since = value
        }
        let client = try pullingClient(request.headers)
        let selection = try requestedSelection(request)
        let wait = waits ? try requestedWait(request) : 0
        // A user's read may be sent to a granted cacheable read; the owner's read of a restricted collection never is.
        let redirecting = redirects(request, since: since, headOnly: headOnly) && (!restricted || (reader != nil && configuration.readGrants != nil))
        // A `GET` of a public collection's whole dataset is the same answer for everyone at its
        // token (ReadRoute+PublicAnswers).
        let gzip = acceptsGzip(request.headers)
        let shared = reader == nil && !restricted && !headOnly && selection.isEverything && !Self.isSelectionToken(since) && !redirecting
        let start = shared ? publicStart(collection, since: since, gzip: gzip) : nil
        var kept: AnswerCache.Entry?
        func read() async throws -> (ReadResult, UInt64?) {
            kept = nil
            if let start, let answer = try await keptAnswer(collection, since: since, client: client, start: start, gzip: gzip) {
                kept = answer.kept
                return answer.read
            }
            if let reader {
                return try await userRead(
                    collection, reader, selection, since: since, client: client, sent: conditional.base, granting: redirecting ? request : nil)
            }
            if selection.isEverything, !Self.isSelectionToken(since) {
                guard redirecting else { return try await store.read(collection, since: since, client: client) }
                // A redirect names where the answer ends: the verdict alone, no records read.
                switch try await store.verdict(collection, since: since, client: client) {
                case (.answer(let result), let last): return (result, last)
                case (.stream(let token, let mode, let digest), let last): return (.changes(EmptyFeed(token: token, digest: digest, mode: mode)), last)
                }
            }
            return try await selectionRead(collection, selection, since: since, client: client, sent: conditional.base, computing: !redirecting)
        }
        let (result, found) = try await read()
        if wait > 0, case .notModified = result {
            // Each answer of the wait is the router's to the request at that moment, its caller
            // authenticated and its read decided again: a token that expired, or a key set that
            // dropped its key, while the request waited is `401`, and rules that changed meanwhile
            // decide what it reads, pinned again (never the principal, policy or rules it was first
            // decided under).
            return try await waitForChange(wait) {
                try await underOneVersion(store) {
                    try await $0.handle(request, context: context, caller: Caller(request, $0.configuration), headOnly: headOnly, waits: false)
                }
            }
        }
        let lastMutation = await heard(found, of: client, caller)
        if let lastMutation { headers[Self.deltaLastMutation] = String(lastMutation) }
        switch result {
        case .rejected(let rejection):
            throw reset(rejection, sent: conditional.base)
        case .notModified(let token, let digest):
            var fields = Self.notModifiedFields(token, digest)
            if let lastMutation { fields[Self.deltaLastMutation] = String(lastMutation) }
            if restricted { (fields[.cacheControl], fields[.vary]) = (headers[.cacheControl], headers[.vary]) }
            return Response(status: .notModified, headers: fields)
        case .changes(let feed as GrantedFeed):
            headers[.location] = feed.location
            headers[.eTag] = feed.token.entityTag
            headers[.lastModified] = feed.token.lastModified
            headers[Self.deltaDigest] = feed.digest.hex
            if case .delta = feed.mode { headers[Self.deltaBase] = feed.base }
            metrics.redirects.increment()
            return Response(status: .temporaryRedirect, headers: headers)
        case .changes(let feed) where redirecting && !restricted:
            feed.close()
            return redirect(collection, since: since, until: feed.token.unmarked, request: request, headers: headers)
        case .changes(let feed):
            headers[.eTag] = feed.token.entityTag
            headers[.lastModified] = feed.token.lastModified
            headers[Self.deltaDigest] = feed.digest.hex
            headers[.contentType] = "application/json"
            switch feed.mode {
            case .full:
                headers[Self.deltaMode] = "full"
            case .delta:
                headers[Self.deltaMode] = "delta"
                headers[Self.deltaBase] = conditional.base?.trimmingWhitespace
            }
            if headOnly {
                feed.close()
                return Response(status: .ok, headers: headers)
            }
            if gzip { headers[.contentEncoding] = "gzip" }
            if let start {
                let body = publicBody(feed, kept: kept, collection: collection, since: since, start: start, gzip: gzip)
                return Response(status: .ok, headers: headers, body: body)
            }
            return Response(status: .ok, headers: headers, body: body(feed, collection: collection, gzip: gzip))
        }
    }

    /// What a pull's `Delta-Last-Mutation` says of `client`, whose last mutation id the read
    /// found to be `last`: `last` when the request's credential is the principal the client id
    /// belongs to (the owner hears every one; the client key's, and those pushed before
    /// principals were recorded, are heard by any reader, as apps pull without a credential);
    /// `0` otherwise, as for a client that never pushed. Looked up after the read: an owner
    /// never changes, and one recorded in the transaction that recorded the mutations seen.
    private func heard(_ last: UInt64?, of client: String?, _ caller: Caller) async -> UInt64? {
        guard let last, last > 0, let client else { return last }
        let owner: String?
        do { owner = try await store.owner(ofClient: client) } catch { return 0 }
        guard let owner, owner != Principal.clientKeyName else { return last }
        let reader = try? await caller.credential(reading: DeltaHeader.client)
        return reader == .owner || reader?.ledgerName == owner ? last : 0
    }

    /// The `Delta-Client` id of a pull, when it sends one: the same rules as a push's `client`.
    private func pullingClient(_ headers: HTTPFields) throws -> String? {
        guard let value = headers[Self.deltaClient] else { return nil }
        guard !value.isEmpty, value.utf8.count <= PushRequest.maximumClientLength else {
            throw Problem.badRequest("invalid-client", "\(DeltaHeader.client): must be 1 to \(PushRequest.maximumClientLength) bytes (got \(value.utf8.count))")
        }
        return value
    }

    /// The reset signal: `409 Conflict`, `Delta-Reset: <reason>`, a problem body.
    func reset(_ rejection: TokenRejection, sent: String?) -> Problem {
        let why: String
        switch rejection {
        case .malformed: why = "is not a token this server issued"
        case .foreignDatabase: why = "was issued by a different database"
        case .unknownCommit: why = "names a commit this database does not have (its history was rolled back or rebuilt)"
        case .ahead: why = "names a position after this database's newest commit"
        case .expired: why = "is older than the history this database still holds"
        case .selectionChanged: why = "was issued to another selection (filter or limit) than the one this request asks for"
        case .userChanged: why = "was issued to another user (or to none) than the one this request's Authorization names"
        case .rulesChanged: why = "was issued under other rules than the ones this server holds now"
        }
        let shown = String(reflecting: String((sent ?? "").prefix(100)))
        return Problem(
            .conflict, "reset-required", "token: \(why) (\(shown)); reset to the snapshot and sync again",
            extensions: [("reason", rejection.rawValue)], headers: [Self.deltaReset: rejection.rawValue])
    }

    /// Streams the feed from the open read transaction to the socket, gzip-encoded when asked.
    /// With a `recorder`, every byte sent is also recorded, and `finished` runs once all were sent.
    func body(
        _ feed: any ChangeFeed, collection: CollectionName, gzip: Bool,
        recorder: AnswerRecorder? = nil, finished: (@Sendable () -> Void)? = nil
    ) -> ResponseBody {
        let chunkBytes = configuration.chunkBytes
        let level = configuration.gzipLevel
        let metrics = self.metrics
        return ResponseBody { writer in
            defer { feed.close() }
            var plain: [UInt8] = []
            plain.reserveCapacity(chunkBytes + 8192)
            var encoded: [UInt8] = []
            var records = DeltaBodyWriter(collection: collection, into: &plain)
            let compressor = gzip ? try GzipCompressor(level: level) : nil
            func send(_ writer: inout any ResponseBodyWriter, last: Bool) async throws {
                if let compressor {
                    if last { compressor.finish(into: &encoded) } else { compressor.compress(plain, into: &encoded) }
                    if !last { plain.removeAll(keepingCapacity: true) }
                    recorder?.append(encoded)
                    if !encoded.isEmpty { try await writer.write(ByteBuffer(bytes: encoded)) }
                    encoded.removeAll(keepingCapacity: true)
                } else if !plain.isEmpty {
                    recorder?.append(plain)
                    try await writer.write(ByteBuffer(bytes: plain))
                    plain.removeAll(keepingCapacity: true)
                }
            }
            while let batch = try await feed.next(maximumBytes: chunkBytes) {
                batch.forEach { body, hidden in records.append(body: body, hidden: hidden, into: &plain) }
                try await send(&writer, last: false)
            }
            records.finish(into: &plain)
            if let compressor {
                compressor.compress(plain, into: &encoded)
                plain.removeAll()
            }
            try await send(&writer, last: true)
            try await writer.finish(nil)
            finished?()
            switch feed.mode {
            case .full: metrics.fullRecords.record(Double(records.count))
            case .delta: metrics.deltaRecords.record(Double(records.count))
            }
        }
    }
}

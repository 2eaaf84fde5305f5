import DeltaCore
import DeltaStore
import HTTPTypes
import Hummingbird
import NIOCore
import Prometheus

/// Cacheable reads (`CacheableRead`, docs/PROTOCOL.md "Cacheable reads"): the `307` a conditional
/// read answers when the client allows it, and the immutable answer of `?since=&until=`.
extension ReadRoute {
    /// Whether this conditional read answers a change with a `307` to its cacheable read: the
    /// server runs with `cacheableReads`, the client sent `Delta-Redirect`, and the read starts
    /// from nothing or an entity tag (a date alone cannot be put in a URL exactly).
    func redirects(_ request: Request, since: Since, headOnly: Bool) -> Bool {
        guard configuration.cacheableReads, !headOnly, request.headers[CacheableRead.redirectHeader] != nil else { return false }
        if case .position = since { return false }
        return true
    }

    /// The `307` to the cacheable read of the answer that ends at `until`; `Delta-Last-Mutation`,
    /// read with `until`, tells a writing client which of its writes that answer holds.
    func redirect(_ collection: CollectionName, since: Since, until: Token, request: Request, headers: HTTPFields) -> Response {
        var sinceToken: Token?
        if case .token(let token) = since { sinceToken = token }
        let parameters = request.uri.queryParameters
        let read = CacheableRead(
            since: sinceToken, until: until,
            filter: parameters[values: "filter"].first.map(String.init), limit: parameters[values: "limit"].first.map(String.init))
        var fields = headers
        fields[.cacheControl] = "no-store"
        fields[.location] = read.location(collection: collection)
        metrics.redirects.increment()
        return Response(status: .temporaryRedirect, headers: fields)
    }

    /// Answers `GET /api/{collection}?since=A&until=B`: exactly the answer from `A` at `B`, cacheable
    /// by anyone for a year; a `307` to the current `until` when the collection has moved on
    /// since `B`; the reset signal when `A` cannot be honoured. With a `grant` (a user's
    /// cacheable read): the granted rows, cacheable until the grant expires.
    func cacheable(_ read: CacheableRead, _ request: Request, collection: CollectionName, headOnly: Bool) async throws -> Response {
        let grant = read.grant == nil ? nil : try checkedGrant(read, collection)
        let gzip = acceptsGzip(request.headers)
        let key = AnswerCache.key(target: "\(collection.rawValue)?\(read.query)", gzip: gzip)
        if let kept = answers.entry(key) {
            metrics.cacheableAnswers(computed: false)
            // The body's length, named here: a `HEAD`'s empty body would otherwise say `Content-Length: 0`,
            // where the `GET` it answers as says the kept body's length.
            var headers = kept.headers
            headers[.contentLength] = String(kept.body.readableBytes)
            return Response(status: .ok, headers: headers, body: headOnly ? ResponseBody() : ResponseBody(byteBuffer: kept.body))
        }
        let selection = try requestedSelection(request)
        let since: Since = read.since.map { .token($0) } ?? .nothing
        let sent = read.since?.entityTag
        let result: ReadResult
        if let grant {
            guard let granted = try await grantRead(read, grant, collection, selection, since) else { return askAgain(read, collection) }
            result = granted
        } else if selection.isEverything, !Self.isSelectionToken(since) {
            result = try await store.read(collection, since: since, client: nil).result
        } else {
            result = try await selectionRead(collection, selection, since: since, client: nil, sent: sent).0
        }
        let feed: any ChangeFeed
        switch result {
        case .rejected(let rejection): throw reset(rejection, sent: sent)
        case .notModified(let token, let digest): feed = EmptyFeed(token: token, digest: digest, mode: .delta(since: token.position))
        case .changes(let changes): feed = changes
        }
        guard feed.token.sameCommit(as: read.until) else {
            feed.close()
            let current = feed.token.unmarked
            if current.database == read.until.database, read.until.position > current.position {
                throw Problem.badRequest(
                    "invalid-until", "until: names position \(read.until.position), after this database's newest commit (\(current.position))")
            }
            return redirect(collection, since: since, until: current, request: request, headers: [:])
        }
        metrics.cacheableAnswers(computed: true)
        let headers = answerHeaders(feed, sent: sent, grant: grant)
        if headOnly {
            feed.close()
            return Response(status: .ok, headers: headers)
        }
        let recorder = answers.maximumEntryBytes > 0 ? AnswerRecorder(limit: answers.maximumEntryBytes) : nil
        return keptAnswer(feed, collection: collection, key: key, gzip: gzip, headers: headers, recorder: recorder, expires: grant?.expires)
    }

    /// The headers of a cacheable read's `200`: kept for a year, or, with a `grant`, until it expires.
    func answerHeaders(_ feed: any ChangeFeed, sent: String?, grant: ReadGrant?) -> HTTPFields {
        var headers: HTTPFields = [:]
        if let grant {
            // `Expires`, not `max-age`: the answer is kept and sent again, and a date stays right.
            headers[.cacheControl] = CacheableRead.granted
            headers[.expires] = HTTPDate.format(grant.expires)
        } else {
            headers[.cacheControl] = CacheableRead.immutable
        }
        // With listed origins, each origin's copy names it (`CrossOrigin`): a cache keeps one per origin.
        headers[.vary] = configuration.crossOrigin?.variesByOrigin == true ? "Accept-Encoding, Origin" : "Accept-Encoding"
        headers[.eTag] = feed.token.entityTag
        headers[.lastModified] = feed.token.lastModified
        headers[Self.deltaDigest] = feed.digest.hex
        headers[.contentType] = "application/json"
        switch feed.mode {
        case .full: headers[Self.deltaMode] = "full"
        case .delta:
            headers[Self.deltaMode] = "delta"
            headers[Self.deltaBase] = sent
        }
        return headers
    }

    /// A cacheable read's `200` streaming `feed`, recorded and kept in `AnswerCache` under `key`
    /// once all of it was sent (when it fits), until `expires` when given.
    func keptAnswer(
        _ feed: any ChangeFeed, collection: CollectionName, key: String, gzip: Bool, headers: HTTPFields, recorder: AnswerRecorder?, expires: UInt64?
    ) -> Response {
        var headers = headers
        if gzip { headers[.contentEncoding] = "gzip" }
        let answers = self.answers
        let kept = headers
        let rules = configuration.rules?.version
        return Response(
            status: .ok, headers: headers,
            body: body(feed, collection: collection, gzip: gzip, recorder: recorder) {
                guard let bytes = recorder?.recorded else { return }
                answers.keep(key, AnswerCache.Entry(headers: kept, body: ByteBuffer(bytes: bytes), expires: expires), rules: rules)
            })
    }
}

/// A feed with no records: the empty delta of a cacheable read whose ends are the same token,
/// and the answer a redirecting read only needs the token of.
final class EmptyFeed: ChangeFeed {
    let token: Token
    let digest: StateDigest
    let mode: FeedMode

    init(token: Token, digest: StateDigest, mode: FeedMode) {
        self.token = token
        self.digest = digest
        self.mode = mode
    }

    func next(maximumBytes: Int) async throws -> RecordBatch? { nil }
    func close() {}
}

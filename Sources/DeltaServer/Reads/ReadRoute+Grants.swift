import DeltaCore
import DeltaRules
import DeltaStore
import Foundation
import HTTPTypes
import Hummingbird

/// Users' cacheable reads (docs/PROTOCOL.md, "Users' cacheable reads"): a user's conditional read
/// that changed is answered with a `307` to `?grant=…&since=…&until=…`, the cacheable read of
/// the rows their rule gives (`ReadGrant`), signed and expiring. Users whose rule gives the same
/// rows at the same token are sent the same URL, so a cache in front computes their answer once;
/// the `307` itself carries the user's own token, which the cached answer cannot.
extension ReadRoute {
    /// The `307` of a user's read that may be sent a grant; nil to answer it directly (a grant
    /// that would be too long). `rows` is the read rule resolved for the user, `rule` the rule,
    /// unchanged since the token (`held` equals `rows`): a grant or revoke is answered directly.
    func grantedUserRead(
        _ collection: CollectionName, _ source: any RuleSource, _ mode: FeedMode, rule: RuleFilter, rows: Filter, selection: Selection,
        mark: SelectionMark?, since: Since, user: UserMark, grants: ReadGrants, request: Request
    ) async throws -> ReadResult? {
        var neutral: Token?
        if case .token(let token) = since, let mark {
            neutral = token.marked(SelectionMark(fingerprint: mark.fingerprint, boundary: mark.boundary, digest: mark.digest))
        }
        let until = try await source.newestToken(of: [collection] + rule.sources.map(\.collection))
        let grant = ReadGrant(rows: rows, rulesVersion: source.rulesVersion, expires: grants.expiry(now: UInt64(Date().timeIntervalSince1970)))
        let parameters = request.uri.queryParameters
        let plain = CacheableRead(
            since: neutral, until: until, filter: parameters[values: "filter"].first.map(String.init),
            limit: parameters[values: "limit"].first.map(String.init), grant: grant.unsigned)
        let signed = plain.granted(grant.unsigned + "." + Base64URL.encode(grants.signature(plain, collection: collection)))
        guard let value = signed.grant, value.utf8.count <= ReadGrant.maximumBytes else { return nil }
        // Kept gzip-encoded: the request that follows the 307 is a cache's fetch (Varnish asks
        // for gzip) or a URLSession's (which does too).
        let gzip = true
        let key = AnswerCache.key(target: "\(collection.rawValue)?\(signed.query)", gzip: gzip)
        func mine(_ token: Token) -> Token {
            token.marked(token.selection.map { SelectionMark(fingerprint: $0.fingerprint, boundary: $0.boundary, digest: $0.digest, user: user) })
        }
        if let kept = answers.entry(key), let tag = kept.headers[.eTag], let token = try? Token(entityTag: tag),
            let digest = kept.headers[Self.deltaDigest].flatMap({ StateDigest(hex: $0) })
        {
            // Another user of the same rows was here first: no records read at all.
            source.close()
            return .changes(
                GrantedFeed(location: signed.location(collection: collection), token: mine(token), digest: digest, mode: mode, base: neutral?.entityTag))
        }
        let within = try Self.within(rows, selection)
        let result = try await SelectionFeed.open(source, mode, selection: within, mark: mark, user: nil, fingerprint: selection.fingerprint, tombstones: .bare)
        switch result {
        case .rejected: return result
        case .notModified(let token, let digest): return .notModified(mine(token), digest)
        case .changes(let feed):
            let answer = GrantAnswerFeed(feed, token: until.marked(feed.token.selection))
            // Keep the answer for the cacheable read the client asks for next (through the cache).
            metrics.cacheableAnswers(computed: true)
            let headers = answerHeaders(answer, sent: neutral?.entityTag, grant: grant)
            if let recorder = answers.maximumEntryBytes > 0 ? AnswerRecorder(limit: answers.maximumEntryBytes) : nil {
                let response = keptAnswer(answer, collection: collection, key: key, gzip: gzip, headers: headers, recorder: recorder, expires: grant.expires)
                try? await response.body.write(KeepingWriter(recorder: recorder))
            } else {
                answer.close()
            }
            return .changes(
                GrantedFeed(
                    location: signed.location(collection: collection), token: mine(answer.token), digest: answer.digest, mode: mode, base: neutral?.entityTag))
        }
    }

    /// The grant of a user's cacheable read, checked: signed by this database's key for this very
    /// read, and not expired. `403 grant-invalid` or `grant-expired` otherwise.
    func checkedGrant(_ read: CacheableRead, _ collection: CollectionName) throws -> ReadGrant {
        guard let grants = configuration.readGrants, let text = read.grant, let (grant, signature) = ReadGrant.parse(text),
            grants.isValid(signature, of: read.granted(grant.unsigned), collection: collection)
        else {
            throw Problem(
                .forbidden, "grant-invalid",
                "grant: not a grant this server signed for this read (\(String(reflecting: String((read.grant ?? "").prefix(60)))))")
        }
        guard UInt64(Date().timeIntervalSince1970) < grant.expires else {
            throw Problem(.forbidden, "grant-expired", "grant: expired at \(HTTPDate.format(grant.expires)); read the collection again with your token")
        }
        return grant
    }

    /// The answer of a granted cacheable read: the granted rows (within the read's own filter and
    /// limit) from `since` to exactly `until`; nil when it cannot be (the rules changed, or the
    /// rows moved on since `until`): the client then asks again with its token.
    func grantRead(_ read: CacheableRead, _ grant: ReadGrant, _ collection: CollectionName, _ selection: Selection, _ since: Since) async throws -> ReadResult?
    {
        guard let rows = grant.filter, let rule = configuration.rules?.rules.rule(for: collection), case .when(let filter) = rule.read else {
            throw Problem(.forbidden, "grant-invalid", "grant: names rows of a collection the rules give users no reads of")
        }
        let mark = read.since?.selection
        guard read.since == nil || (mark != nil && mark?.user == nil && mark?.fingerprint == selection.fingerprint) else {
            throw Problem(.forbidden, "grant-invalid", "grant: since is not a token of this read's selection")
        }
        let (start, _) = try await store.openRuleRead(collection, since: since, client: nil)
        guard case .source(let source, let mode) = start else {
            if case .rejected(let rejection) = start { return .rejected(rejection) }
            return nil
        }
        do {
            let newest = try await source.newestToken(of: [collection] + filter.sources.map(\.collection))
            // This instance's rules, the database's and the grant's must all be the same version.
            guard source.rulesVersion == grant.rulesVersion, configuration.rules?.version == grant.rulesVersion, newest.sameCommit(as: read.until) else {
                source.close()
                return nil
            }
            let within = try Self.within(rows, selection)
            switch try await SelectionFeed.open(source, mode, selection: within, mark: mark, user: nil, fingerprint: selection.fingerprint, tombstones: .bare) {
            case .notModified(let token, let digest): return .notModified(read.until.marked(token.selection), digest)
            case .changes(let feed): return .changes(GrantAnswerFeed(feed, token: read.until.marked(feed.token.selection)))
            case .rejected(let rejection): return .rejected(rejection)
            }
        } catch {
            source.close()
            throw error
        }
    }

    /// The `307` that sends a client whose granted read cannot be answered back to its own
    /// conditional read (`Location` without `until`), where its token decides.
    func askAgain(_ read: CacheableRead, _ collection: CollectionName) -> Response {
        let plain = CacheableRead(since: nil, until: read.until, filter: read.filter, limit: read.limit).query
        let query = plain.split(separator: "&").filter { !$0.hasPrefix("until=") }.joined(separator: "&")
        var fields: HTTPFields = [:]
        fields[.cacheControl] = "no-store"
        fields[.location] = query.isEmpty ? collection.rawValue : "\(collection.rawValue)?\(query)"
        return Response(status: .temporaryRedirect, headers: fields)
    }
}

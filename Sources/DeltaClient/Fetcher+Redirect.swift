import DeltaCore
import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Cacheable reads (docs/PROTOCOL.md, "Cacheable reads"): a server behind an HTTP cache answers a
/// conditional read that changed with a `307` to `?since=<sent>&until=<current>`, whose answer
/// never changes, so the cache serves it to every client at the same token.
extension Fetcher {
    /// The most `307`s followed for one read before asking without `Delta-Redirect`.
    static let maximumRedirects = 3

    /// Sends the conditional read of `url`, following the server's `307`s to cacheable reads.
    ///
    /// The `307` carries `Delta-Last-Mutation` read with the `until` it names, and the cacheable
    /// read answers exactly at that `until`, so a writing client learns which of its writes the
    /// data holds as exactly as from a direct answer. When the collection moved on in between
    /// (the cacheable read answers `307` again), the conditional read is sent again; after
    /// `maximumRedirects` tries it is sent without `Delta-Redirect` and answered directly.
    ///
    /// With credentials, the request carries the user's token (not the cacheable read it may be
    /// sent to: those are public); a `401 token-expired` asks for a new token and tries once more.
    ///
    /// With `confirming`, the pull names the client (`Delta-Client`) and the result's
    /// `lastMutation` says which of its writes the data holds.
    func get(_ url: URL, validators: CollectionState?, confirming: Bool = false) async throws -> Fetched {
        let answer = try await get(url, validators: validators, bearer: try await credentials?.token(refreshing: false), confirming: confirming)
        guard let credentials, answer.status == 401, answer.problemType == "token-expired" else { return answer }
        answer.discard()
        return try await get(url, validators: validators, bearer: try await credentials.token(refreshing: true), confirming: confirming)
    }

    private func get(_ url: URL, validators: CollectionState?, bearer: String?, confirming: Bool) async throws -> Fetched {
        for _ in 0..<Self.maximumRedirects {
            let first = try await send(url, validators: validators, redirect: true, bearer: bearer, confirming: confirming)
            guard first.status == 307, let target = Self.cacheableTarget(first.header("Location"), of: url) else { return first }
            first.discard()
            var answer = try await send(target, validators: nil, redirect: false)
            guard answer.status == 307 else {
                // The cacheable read is public and names no client: the 307's value, read with its `until`, holds.
                answer.lastMutation = first.lastMutation
                // Nor does it say whose rows it holds: the 307 does (`Vary: Authorization`, `Cache-Control:
                // private`, the user's token), and a sign-out must find the collection the user's.
                answer.redirectedPrivately = first.isPrivate
                // A user's 307 (to a granted read, shared by the users of the same rows) carries
                // the user's own token for that answer: the client keeps it, not the answer's. A
                // delta's base is the user's token without its user, as the 307 says: when it is,
                // the delta is from the token the client sent.
                if answer.status == 200, let tag = first.header("ETag"), let date = first.header("Last-Modified") {
                    (answer.headers["etag"], answer.headers["last-modified"]) = (tag, date)
                    let base = DeltaHeader.base.lowercased()
                    if let sent = validators?.entityTag, answer.headers[base] != nil, answer.headers[base] == first.headers[base] {
                        answer.headers[base] = sent
                    }
                }
                return answer
            }
            answer.discard()
        }
        return try await send(url, validators: validators, redirect: false, bearer: bearer, confirming: confirming)
    }

    /// The cacheable read a `Location` names: the same scheme, host, port and path as `url` with
    /// an `until` parameter; nil for anything else (which is then handled as the answer it is).
    static func cacheableTarget(_ location: String?, of url: URL) -> URL? {
        guard let location, let target = URL(string: location, relativeTo: url)?.absoluteURL,
            let parts = URLComponents(url: target, resolvingAgainstBaseURL: false),
            let base = URLComponents(url: url, resolvingAgainstBaseURL: false),
            parts.scheme == base.scheme, parts.host == base.host, parts.port == base.port, parts.path == base.path,
            parts.queryItems?.contains(where: { $0.name == "until" }) == true
        else { return nil }
        return target
    }
}

/// Stops URLSession from following a `307` to a cacheable read on its own: the fetcher follows
/// it itself, after reading the `307`'s headers. Every other redirect is followed as before.
final class CacheableRedirects: NSObject, URLSessionTaskDelegate, Sendable {
    func urlSession(
        _ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
        newRequest request: URLRequest, completionHandler: @escaping @Sendable (URLRequest?) -> Void
    ) {
        // Only the query is looked at here, not `cacheableTarget`'s whole rule: on Linux the new
        // request URLSession builds from a relative `Location` does not keep the path's directory
        // (checking it here let URLSession follow, and the server answered 404 no such route);
        // the fetcher resolves `Location` itself.
        let cacheable = response.statusCode == 307 && request.url?.query?.contains("until=") == true
        completionHandler(cacheable ? nil : request)
    }
}

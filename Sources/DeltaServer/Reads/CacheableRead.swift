import DeltaCore
import DeltaStore
import Foundation
import HTTPTypes
import Hummingbird

/// A cacheable read (docs/PROTOCOL.md, "Cacheable reads"): `GET /api/{collection}?since=A&until=B`
/// names both ends of its answer, so the answer never changes and any HTTP cache may keep it
/// (`Cache-Control: public, max-age=31536000, immutable`). Without `since` it is the full dataset
/// at `until`. A client reaches one through a `307` from its conditional request (`Delta-Redirect`).
///
/// The cache key is the URL, and the URL names the token the client holds, so a cache can never
/// hand one client's delta to another client's token.
struct CacheableRead: Sendable, Equatable {
    /// The token the answer starts from (nil: the full dataset).
    let since: Token?
    /// The collection's token (no selection mark) the answer is exactly at.
    let until: Token
    /// The selection's query parameters as the request gave them (empty: the whole collection).
    let filter: String?
    let limit: String?
    /// On a user's cacheable read, the signed grant of the rows it may hold (`ReadGrant`).
    let grant: String?

    /// The request header a client sends to say it follows a `307` to a cacheable read.
    static let redirectHeader = HTTPField.Name(DeltaHeader.redirect)!
    /// `Cache-Control` of a cacheable read's `200`: a year, and never revalidated.
    static let immutable = "public, max-age=31536000, immutable"
    /// `Cache-Control` of a granted read's `200` (a user's): kept by anyone until its `Expires`,
    /// the grant's expiry, and never revalidated before.
    static let granted = "public, immutable"

    /// The cacheable read a request names; nil when it has no `until` (an ordinary read).
    init?(_ request: Request) throws {
        let parameters = request.uri.queryParameters
        let untils = parameters[values: "until"]
        let sinces = parameters[values: "since"]
        guard !untils.isEmpty else {
            if !sinces.isEmpty { throw Problem.badRequest("invalid-until", "since: needs until (a cacheable read names both ends)") }
            return nil
        }
        guard untils.count == 1, sinces.count <= 1 else {
            throw Problem.badRequest("invalid-until", "until, since: give each at most once (got \(untils.count) and \(sinces.count))")
        }
        let grants = parameters[values: "grant"]
        guard grants.count <= 1 else { throw Problem(.forbidden, "grant-invalid", "grant: give it at most once (got \(grants.count))") }
        guard let until = try? Token(urlValue: untils[0]), until.selection == nil else {
            throw Problem.badRequest("invalid-until", "until: not a collection token this server issued (\(String(reflecting: String(untils[0].prefix(100)))))")
        }
        guard parameters[values: "wait"].isEmpty else {
            throw Problem.badRequest("invalid-wait", "wait: a cacheable read never waits (it names its answer); drop wait or until")
        }
        self.until = until
        self.filter = parameters[values: "filter"].first.map(String.init)
        self.limit = parameters[values: "limit"].first.map(String.init)
        self.grant = grants.first.map(String.init)
        if let text = sinces.first {
            // A malformed start is the client's token: it must reset, exactly as with If-None-Match.
            self.since = try? Token(urlValue: text)
            if self.since == nil { throw MalformedSince(text: String(text.prefix(100))) }
        } else {
            self.since = nil
        }
    }

    /// A cacheable read of these ends.
    init(since: Token?, until: Token, filter: String?, limit: String?, grant: String? = nil) {
        self.since = since
        self.until = until.unmarked
        self.filter = filter
        self.limit = limit
        self.grant = grant
    }

    /// The same read with another `grant`.
    func granted(_ grant: String?) -> CacheableRead { CacheableRead(since: since, until: until, filter: filter, limit: limit, grant: grant) }

    /// The query string, parameters always in one order (`filter`, `grant`, `limit`, `since`,
    /// `until`) so that every client at the same token asks for the same URL.
    var query: String {
        var items: [String] = []
        if let filter { items.append("filter=" + Self.escape(filter)) }
        if let grant { items.append("grant=" + Self.escape(grant)) }
        if let limit { items.append("limit=" + Self.escape(limit)) }
        if let since { items.append("since=" + since.urlValue) }
        items.append("until=" + until.urlValue)
        return items.joined(separator: "&")
    }

    /// The `Location` of a redirect to this read from `/api/{collection}`: relative, so it stays
    /// under whatever prefix a proxy mounts the API at.
    func location(collection: CollectionName) -> String { "\(collection.rawValue)?\(query)" }

    /// Percent-encodes everything but RFC 3986's unreserved characters.
    private static func escape(_ text: String) -> String {
        var allowed = CharacterSet(charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")
        allowed.insert(charactersIn: "-._~")
        return text.addingPercentEncoding(withAllowedCharacters: allowed) ?? text
    }
}

/// A cacheable read whose `since` does not parse: answered like a malformed `If-None-Match`.
struct MalformedSince: Error {
    let text: String
}

import DeltaCore
import Foundation
import HTTPTypes
import Hummingbird

/// The web origins whose pages may call this server from a browser (`--allow-origin`): the
/// server's side of CORS (the Fetch standard's "CORS protocol").
///
/// A listed origin may do what any client may: read, write, push, upload, with the same
/// credentials (an `Authorization` header; the API uses no cookies, so no
/// `Access-Control-Allow-Credentials` is ever sent). `*` lets any other origin make public reads
/// only: `GET` and `HEAD` without `Authorization`. An origin neither listed nor covered by `*`
/// gets no CORS header at all, so its page cannot read an answer. The answers name the one origin
/// they were given for, with `Vary: Origin`, so that an HTTP cache in front keeps one copy per
/// origin and never hands one origin's permission to another.
public struct CrossOrigin: Sendable, Equatable {
    /// The origins listed, as browsers send them (`https://app.example.com`, lower case, no path).
    public let origins: Set<String>
    /// Whether any origin may make public reads (`--allow-origin '*'`).
    public let anyOriginReads: Bool

    /// The request headers a browser may send: what the clients send.
    static let allowedHeaders = [
        "Authorization", "Content-Type", "Delta-Client", "Delta-Redirect", "If-Match", "If-Modified-Since", "If-None-Match", "If-Range", "Range",
        "Upload-Offset",
    ]
    /// The request headers a public read from any origin may send: no credential.
    static let publicHeaders = ["Delta-Redirect", "If-Modified-Since", "If-None-Match", "If-Range", "Range"]
    /// The response headers a page may read beyond the Fetch standard's safelisted ones.
    static let exposedHeaders = [
        "Content-Encoding", "Content-Range", "Delta-Base", "Delta-Digest", "Delta-Last-Mutation", "Delta-Mode", "Delta-Reset", "ETag", "Last-Modified",
        "Location", "Retry-After", "Upload-Offset",
    ]
    /// How long a browser may keep a preflight's answer, in seconds (Chromium caps it at 7,200).
    static let maximumAge = 7_200

    /// Reads `--allow-origin` values: each an origin (`scheme://host[:port]`, no path) or `*`.
    /// Throws for anything else, saying why: `--allow-origin VALUE: not an origin: why`.
    public init(_ values: [String]) throws {
        var origins: Set<String> = []
        var any = false
        for value in values {
            if value == "*" {
                any = true
                continue
            }
            origins.insert(try Self.origin(value))
        }
        self.origins = origins
        self.anyOriginReads = any
    }

    /// `value` as browsers serialize an origin, or a `CrossOriginError`.
    private static func origin(_ value: String) throws -> String {
        let lowered = value.lowercased()
        guard lowered != "null" else {
            throw CrossOriginError(value, "\"null\" is the origin of sandboxed pages and local files, which any page can produce")
        }
        guard let components = URLComponents(string: lowered), let scheme = components.scheme, scheme == "https" || scheme == "http",
            let host = components.host, !host.isEmpty
        else { throw CrossOriginError(value, "an origin is http:// or https://, a host and an optional port, such as https://app.example.com") }
        guard components.path.isEmpty, components.query == nil, components.fragment == nil, components.user == nil, components.password == nil
        else {
            throw CrossOriginError(value, "an origin has no path, query, fragment or user: write it as the browser's address bar shows it, without the path")
        }
        let defaultPort = scheme == "https" ? 443 : 80
        let port = components.port.map { $0 == defaultPort ? "" : ":\($0)" } ?? ""
        return "\(scheme)://\(host)\(port)"
    }

    /// What this server allows the request's origin, if it sent one.
    enum Grant: Equatable {
        /// A listed origin: everything the API allows anyone.
        case listed(String)
        /// Any origin, for public reads only.
        case publicReads
    }

    /// The grant for a request carrying `Origin: origin`, or nil: no CORS header.
    func grant(_ origin: String) -> Grant? {
        if origins.contains(origin) { return .listed(origin) }
        return anyOriginReads ? .publicReads : nil
    }

    /// Whether answers depend on the request's `Origin`: always, once any origin is allowed. With
    /// listed origins they name it; with `*`, an answer to a request without `Origin` has no CORS
    /// header, so a cache must not hand it to a browser's request either.
    var variesByOrigin: Bool { !origins.isEmpty || anyOriginReads }
}

/// `--allow-origin` given something that is not an origin.
struct CrossOriginError: Error, CustomStringConvertible {
    /// What was given.
    let value: String
    /// Why it is refused.
    let reason: String

    init(_ value: String, _ reason: String) {
        self.value = value
        self.reason = reason
    }

    /// `--allow-origin VALUE: not an origin: why`.
    var description: String { "--allow-origin \(value): not an origin: \(reason)" }
}

/// Answers CORS preflights (`OPTIONS` with `Access-Control-Request-Method`) and adds
/// `Access-Control-Allow-Origin` and `Access-Control-Expose-Headers` to the answers of requests
/// whose origin `CrossOrigin` allows, problems included (so that a page can read why it was
/// refused). Requests without `Origin` pass untouched, but for `Vary: Origin` when answers depend on it.
struct CrossOriginMiddleware<Context: RequestContext>: RouterMiddleware {
    let allowed: CrossOrigin

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        // The console is this origin's alone: no other origin is ever granted anything of it.
        if Console.owns(request.uri.path) { return try await next(request, context) }
        guard let origin = request.headers[.origin] else {
            var response = try await next(request, context)
            if allowed.variesByOrigin { Self.varyByOrigin(&response.headers) }
            return response
        }
        let grant = allowed.grant(origin).flatMap { grant in
            // Any origin reads only what needs no credential: public data.
            grant == .publicReads && (request.headers[.authorization] != nil || ![.get, .head, .options].contains(request.method)) ? nil : grant
        }
        if request.method == .options, let asked = request.headers[.accessControlRequestMethod] {
            return preflight(grant, origin: origin, asked: asked)
        }
        do {
            var response = try await next(request, context)
            add(grant, origin: origin, to: &response.headers)
            return response
        } catch {
            let problem = (error as? Problem) ?? Problem.from(error)
            var headers = problem.headers
            add(grant, origin: origin, to: &headers)
            throw Problem(problem.status, problem.name, problem.detail, values: problem.extensions, headers: headers)
        }
    }

    /// The answer to a preflight: `204`, with the permissions when the origin has any (without
    /// them, the browser refuses the request it asked about and never sends it).
    private func preflight(_ grant: CrossOrigin.Grant?, origin: String, asked: String) -> Response {
        var headers: HTTPFields = [:]
        if allowed.variesByOrigin { Self.varyByOrigin(&headers) }
        headers[values: .vary].append("Access-Control-Request-Method")
        headers[values: .vary].append("Access-Control-Request-Headers")
        switch grant {
        case .listed(let origin):
            headers[.accessControlAllowOrigin] = origin
            headers[.accessControlAllowMethods] = "GET, HEAD, PUT, POST, DELETE"
            headers[.accessControlAllowHeaders] = CrossOrigin.allowedHeaders.joined(separator: ", ")
            headers[.accessControlMaxAge] = String(CrossOrigin.maximumAge)
        case .publicReads:
            headers[.accessControlAllowOrigin] = "*"
            headers[.accessControlAllowMethods] = "GET, HEAD"
            headers[.accessControlAllowHeaders] = CrossOrigin.publicHeaders.joined(separator: ", ")
            headers[.accessControlMaxAge] = String(CrossOrigin.maximumAge)
        case nil:
            break
        }
        headers[.contentLength] = "0"
        return Response(status: .noContent, headers: headers, body: .init())
    }

    /// The headers of an answer to a request from `origin`.
    private func add(_ grant: CrossOrigin.Grant?, origin: String, to headers: inout HTTPFields) {
        if allowed.variesByOrigin { Self.varyByOrigin(&headers) }
        switch grant {
        case .listed(let origin): headers[.accessControlAllowOrigin] = origin
        case .publicReads: headers[.accessControlAllowOrigin] = "*"
        case nil: return
        }
        headers[.accessControlExposeHeaders] = CrossOrigin.exposedHeaders.joined(separator: ", ")
    }

    /// Adds `Origin` to `Vary` unless it is there already (cacheable reads name it themselves).
    static func varyByOrigin(_ headers: inout HTTPFields) {
        let named = headers[values: .vary].flatMap { $0.split(separator: ",") }.map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
        if !named.contains("origin") && !named.contains("*") { headers[values: .vary].append("Origin") }
    }
}

import DeltaCore
import Foundation
import HTTPTypes
import Hummingbird

/// What a console route needs of who asks, and the one place that checks it (docs/SECURITY.md,
/// "The console"). A handler is given the `ConsoleSessions.Session` its access yields and has no
/// other way to reach the console's data.
enum ConsoleHandler: Sendable {
    typealias Context = BasicRequestContext
    /// Anyone: the sign-in page, its form, and the page's script and style (code, no data).
    case open(@Sendable (Request, Context) async throws -> Response)
    /// A page: without a live session, a `303` to the sign-in page.
    case page(@Sendable (Request, Context, ConsoleSessions.Session) async throws -> Response)
    /// The console's JSON reads: without a live session, `401 console-sign-in-required`.
    case data(@Sendable (Request, Context, ConsoleSessions.Session) async throws -> Response)
    /// A state-changing request: a live session, its CSRF token, and not from another site by
    /// the browser's word (`Sec-Fetch-Site`). Its body is a form (the token in its field `csrf`,
    /// the fields given to the handler) or anything else (the token in `X-CSRF-Token`, the body
    /// left for the handler); the other kind is `415`, so a body is never read twice.
    case action(ConsoleBody, @Sendable (Request, Context, ConsoleSessions.Session, ConsoleForm?) async throws -> Response)

    /// The handler the router runs: checks what the access needs, then calls it; every answer,
    /// a refusal or a failure too, carries the console's security headers.
    func gated(_ sessions: ConsoleSessions) -> @Sendable (Request, Context) async throws -> Response {
        let handle = unsecured(sessions)
        return { request, context in
            do {
                return ConsoleResponse.secured(try await handle(request, context))
            } catch {
                let problem = (error as? Problem) ?? Problem.from(error)
                var headers = problem.headers
                ConsoleResponse.secure(&headers)
                throw Problem(problem.status, problem.name, problem.detail, values: problem.extensions, headers: headers)
            }
        }
    }

    private func unsecured(_ sessions: ConsoleSessions) -> @Sendable (Request, Context) async throws -> Response {
        switch self {
        case .open(let handle):
            return handle
        case .page(let handle):
            return { request, context in
                guard let session = Self.session(request, sessions) else { return ConsoleResponse.redirect(to: "/console/sign-in") }
                return try await handle(request, context, session)
            }
        case .data(let handle):
            return { request, context in
                guard let session = Self.session(request, sessions) else { throw ConsoleResponse.signInRequired }
                return try await handle(request, context, session)
            }
        case .action(let body, let handle):
            return { request, context in
                guard let session = Self.session(request, sessions) else { throw ConsoleResponse.signInRequired }
                try Self.sameSite(request)
                guard ConsoleForm.isForm(request) == (body == .form) else {
                    throw Problem(
                        .unsupportedMediaType, "console-body",
                        body == .form
                            ? "console: this action takes a form (application/x-www-form-urlencoded) with its csrf field"
                            : "console: this action takes JSON (application/json), not a form")
                }
                let form = body == .form ? try await ConsoleForm(request) : nil
                guard ConsoleSessions.checks(form?.fields["csrf"] ?? request.headers[ConsoleResponse.csrfHeader], session) else {
                    throw ConsoleResponse.csrfRefused
                }
                return try await handle(request, context, session, form)
            }
        }
    }

    /// The live session a cookie of the request names: the first of its console cookies that
    /// does (a sibling domain can set one of the same name, which the browser sends first).
    static func session(_ request: Request, _ sessions: ConsoleSessions) -> ConsoleSessions.Session? {
        for cookie in cookies(request) {
            if let session = sessions.session(cookie) { return session }
        }
        return nil
    }

    /// The console's cookie that names a live session, if the request has one.
    static func cookie(_ request: Request, _ sessions: ConsoleSessions) -> String? {
        cookies(request).first { sessions.session($0) != nil }
    }

    /// The values of every cookie of the console's name in the request (the header's size bounds them).
    private static func cookies(_ request: Request) -> [String] {
        var found: [String] = []
        for header in request.headers[values: .cookie] {
            for pair in header.split(separator: ";") {
                let parts = pair.split(separator: "=", maxSplits: 1)
                if parts.count == 2, parts[0].trimmingCharacters(in: .whitespaces) == ConsoleSessions.cookieName {
                    found.append(parts[1].trimmingCharacters(in: .whitespaces))
                }
            }
        }
        return found
    }

    /// Refuses a state-changing request a browser says comes from another site or origin
    /// (`Sec-Fetch-Site`): beside the CSRF token and `SameSite=Strict`, a third lock.
    static func sameSite(_ request: Request) throws {
        if let site = request.headers[HTTPField.Name("Sec-Fetch-Site")!], site != "same-origin", site != "none" {
            throw Problem(.forbidden, "console-cross-site", "console: a request from another site is refused (Sec-Fetch-Site: \(site))")
        }
    }
}

/// What a console action's body is.
enum ConsoleBody: Sendable, Equatable {
    /// A form post (`application/x-www-form-urlencoded`): a browser's plain form.
    case form
    /// Anything but a form: JSON, or a rules file; read by the handler.
    case other
}

/// What every console answer carries, and its refusals.
enum ConsoleResponse {
    /// The header a state-changing request's CSRF token travels in.
    static let csrfHeader = HTTPField.Name("X-CSRF-Token")!

    /// The policy of every console answer: no script or style but the console's own, no frame,
    /// nothing sent elsewhere.
    static let contentSecurityPolicy =
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

    /// `response` with the console's security headers: its policy, no caching, no sniffing, no framing, no referrer.
    static func secured(_ response: Response) -> Response {
        var response = response
        secure(&response.headers)
        return response
    }

    /// Adds the console's security headers to `headers`.
    static func secure(_ headers: inout HTTPFields) {
        headers[HTTPField.Name("Content-Security-Policy")!] = contentSecurityPolicy
        headers[.cacheControl] = headers[.cacheControl] ?? "no-store"
        headers[HTTPField.Name("X-Content-Type-Options")!] = "nosniff"
        headers[HTTPField.Name("X-Frame-Options")!] = "DENY"
        headers[HTTPField.Name("Referrer-Policy")!] = "no-referrer"
        headers[HTTPField.Name("Cross-Origin-Opener-Policy")!] = "same-origin"
        headers[HTTPField.Name("Cross-Origin-Resource-Policy")!] = "same-origin"
    }

    /// A `303` to `path`.
    static func redirect(to path: String, headers: HTTPFields = [:]) -> Response {
        var headers = headers
        headers[.location] = path
        headers[.contentLength] = "0"
        return Response(status: .seeOther, headers: headers, body: .init())
    }

    /// The console's JSON without a session.
    static var signInRequired: Problem {
        Problem(.unauthorized, "console-sign-in-required", "console: sign in first at /console/sign-in (no session, or it ended)")
    }

    /// A state-changing request without its session's CSRF token.
    static var csrfRefused: Problem {
        Problem(.forbidden, "console-csrf", "console: the request does not carry this session's CSRF token (X-CSRF-Token, or the form field csrf)")
    }

    /// A JSON answer.
    static func json(_ value: JSONValue, status: HTTPResponse.Status = .ok) -> Response {
        Response(status: status, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(bytes: value.canonicalBytes)))
    }

    /// An HTML page.
    static func html(_ text: String, status: HTTPResponse.Status = .ok, headers: HTTPFields = [:]) -> Response {
        var headers = headers
        headers[.contentType] = "text/html; charset=utf-8"
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(string: text)))
    }
}

/// A form post's fields (`application/x-www-form-urlencoded`), read whole up to a small limit.
struct ConsoleForm: Sendable {
    /// The largest form body read.
    static let maximumBytes = 64 << 10
    /// The fields, by name (the last value of a repeated one).
    let fields: [String: String]

    /// Whether the request's body is a form.
    static func isForm(_ request: Request) -> Bool {
        request.headers[.contentType]?.lowercased().hasPrefix("application/x-www-form-urlencoded") == true
    }

    /// Reads the request's form; `400` when it is no form or too large.
    init(_ request: Request) async throws {
        guard Self.isForm(request) else {
            throw Problem(.unsupportedMediaType, "console-form", "console: expected a form (application/x-www-form-urlencoded)")
        }
        let body: ByteBuffer
        do {
            body = try await request.body.collect(upTo: Self.maximumBytes)
        } catch {
            throw Problem(.contentTooLarge, "console-form", "console: the form is larger than \(Self.maximumBytes) bytes")
        }
        var fields: [String: String] = [:]
        for pair in String(buffer: body).split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false).map {
                String($0).replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? ""
            }
            fields[parts[0]] = parts.count > 1 ? parts[1] : ""
        }
        self.fields = fields
    }
}

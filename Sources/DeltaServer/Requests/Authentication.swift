import DeltaCore
import HTTPTypes
import Hummingbird
import NIOConcurrencyHelpers

/// The one place a request is authenticated (docs/SECURITY.md). Its route's access
/// (`Route.access`) says what it needs, and `RouteHandler.gated` gives the handler exactly the
/// identity that access yields: nothing for `anyone`, a `Caller` for a `reader`, a checked
/// `Credential` for a `writer`, and only the owner through to an `owner` route. Nothing else
/// in the server reads `Authorization` (the raw `304` path only looks up verifications made
/// here: `Authenticator.cachedClaims`). The console's sign-in checks the owner's secret here
/// (`isOwnerSecret`); its sessions are checked in one place of their own, `ConsoleHandler.gated`.
extension Credential {
    /// The credential a write presents; `401` when it presents none that this server accepts,
    /// `403` when the server takes no writes at all. Secrets are compared in constant time.
    fileprivate static func of(_ request: Request, _ configuration: ServerConfiguration) async throws -> Credential {
        guard configuration.writeToken != nil || configuration.clientKey != nil || configuration.authenticator != nil else {
            throw Problem(.forbidden, "read-only", "writes: this server is read-only (start it with --write-token, or --client-key for apps)")
        }
        guard let credential = try await presented(request, configuration, what: "writes") else {
            throw Problem(
                .unauthorized, "unauthorized", "writes: an Authorization: Bearer <secret> header is required",
                headers: [.wwwAuthenticate: "Bearer realm=\"deltasnap\""])
        }
        return credential
    }

    /// Whether `presented` is the owner's secret, compared in constant time: what the console's
    /// sign-in form checks (`Console.signIn`), as the API checks a bearer secret.
    static func isOwnerSecret(_ presented: [UInt8], _ configuration: ServerConfiguration) -> Bool {
        configuration.writeToken.map { constantTimeEqual(presented, Array($0.utf8)) } ?? false
    }

    /// The credential a request presents, nil when it has no `Authorization`; `401` for a
    /// header that is not `Bearer`, a secret that is wrong, or a token that does not verify.
    fileprivate static func presented(_ request: Request, _ configuration: ServerConfiguration, what: String) async throws -> Credential? {
        let challenge: HTTPFields = [.wwwAuthenticate: "Bearer realm=\"deltasnap\""]
        guard let header = request.headers[.authorization] else { return nil }
        let parts = header.split(separator: " ", maxSplits: 1)
        guard parts.count == 2, parts[0].lowercased() == "bearer" else {
            throw Problem(.unauthorized, "unauthorized", "\(what): the Authorization header must be Bearer <secret or token>", headers: challenge)
        }
        let presented = Array(parts[1].utf8)
        // Both comparisons always run, so the time taken says nothing about which one matched.
        let owner = configuration.writeToken.map { constantTimeEqual(presented, Array($0.utf8)) } ?? false
        let client = configuration.clientKey.map { constantTimeEqual(presented, Array($0.utf8)) } ?? false
        if owner { return .owner }
        if client { return .client }
        if let authenticator = configuration.authenticator, presented.contains(UInt8(ascii: ".")) {
            do {
                return .user(try await authenticator.claims(of: String(parts[1])))
            } catch let refusal as TokenRefusal {
                throw refusal.problem
            }
        }
        throw Problem(.unauthorized, "unauthorized", "\(what): the bearer secret is wrong", headers: challenge)
    }

}

/// Who asks a `reader` route, authenticated once, when the answer first depends on it: a public
/// collection's read never asks, so a request for public data is answered whatever credential
/// it carries (as the raw `304` path answers it); a restricted one asks `ReadPolicy`, which asks
/// this.
final class Caller: Sendable {
    /// The user the console's Users page reads as (`Console.readAs`), set only in this process,
    /// for a request that carries no credential of its own; nil for every request from outside.
    @TaskLocal static var readingAs: Credential?

    private let request: Request
    private let configuration: ServerConfiguration
    /// The outcome of the first authentication, kept for the rest of the request.
    private let outcome = NIOLockedValueBox<Result<Credential?, any Error>?>(nil)

    init(_ request: Request, _ configuration: ServerConfiguration) {
        self.request = request
        self.configuration = configuration
    }

    /// The credential presented (nil: none); `401` for one that is wrong or does not verify.
    /// `what` names what was asked for, in that `401`'s detail.
    func credential(reading what: @autoclosure () -> String) async throws -> Credential? {
        if let user = Self.readingAs { return user }
        if let outcome = outcome.withLockedValue({ $0 }) { return try outcome.get() }
        let result: Result<Credential?, any Error>
        do { result = .success(try await Credential.presented(request, configuration, what: what())) } catch { result = .failure(error) }
        outcome.withLockedValue { $0 = result }
        return try result.get()
    }
}

/// A route's handler as its access shapes it: what it is given of who asks.
enum RouteHandler: Sendable {
    /// The requests' context.
    typealias Context = BasicRequestContext
    /// For `anyone`: nothing of who asks.
    case anyone(@Sendable (Request, Context) async throws -> Response)
    /// For a `reader`: the `Caller`, authenticated when the answer depends on it.
    case reader(@Sendable (Request, Context, Caller) async throws -> Response)
    /// For a `writer`: the credential, checked.
    case writer(@Sendable (Request, Context, Credential) async throws -> Response)
    /// For the `owner`: reached by the owner only.
    case owner(@Sendable (Request, Context) async throws -> Response)

    /// The access this handler is shaped for.
    var access: RouteAccess {
        switch self {
        case .anyone: .anyone
        case .reader: .reader
        case .writer: .writer
        case .owner: .owner
        }
    }

    /// The handler the router runs for `route`, authenticating as its access requires; a handler
    /// shaped for another access than the route declares stops the server at start (a test
    /// builds the router with every route: `RouteAccessTests`).
    func gated(_ route: Route, _ configuration: ServerConfiguration) -> @Sendable (Request, Context) async throws -> Response {
        precondition(access == route.access, "route \(route.method) \(route.path) is \(route.access.rawValue), its handler \(access.rawValue)")
        switch self {
        case .anyone(let handle):
            return handle
        case .reader(let handle):
            return { request, context in try await handle(request, context, Caller(request, configuration)) }
        case .writer(let handle):
            return { request, context in try await handle(request, context, try await Credential.of(request, configuration)) }
        case .owner(let handle):
            return { request, context in
                try await Credential.of(request, configuration).mustBeOwner(route.ownerAction)
                return try await handle(request, context)
            }
        }
    }
}

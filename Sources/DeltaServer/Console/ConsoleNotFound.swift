import Hummingbird

/// The answer to a path under `/console` that is no console route (or a route asked with a
/// method it does not take): `404 not-found` with the console's security headers, as every other
/// console answer has them. Added to the router after every route, so it wraps only the router's
/// not-found answer.
struct ConsoleNotFound<Context: RequestContext>: RouterMiddleware {
    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard Console.owns(request.uri.path) else { return try await next(request, context) }
        var headers: HTTPFields = [:]
        ConsoleResponse.secure(&headers)
        throw Problem(.notFound, "not-found", "console: \(request.method) \(request.uri.path): no such page or action", headers: headers)
    }
}

extension Console {
    /// Whether `path` is the console's: its first segment as the router reads it (empty segments
    /// skipped: `//console/` is `/console/`) is `console`. CORS never applies to such a path, and
    /// the console's not-found answer covers it.
    static func owns(_ path: String) -> Bool { path.split(separator: "/").first == "console" }
}

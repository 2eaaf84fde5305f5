import Hummingbird

/// The answer to a path under `/console` that is no console route (or a route asked with a
/// method it does not take): `404 not-found` with the console's security headers, as every other
/// console answer has them. Added to the router after every route, so it wraps only the router's
/// not-found answer.
struct ConsoleNotFound<Context: RequestContext>: RouterMiddleware {
    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        // The first segment as the router reads the path (empty segments skipped), as `CrossOriginMiddleware` reads it.
        guard request.uri.path.split(separator: "/").first == "console" else { return try await next(request, context) }
        var headers: HTTPFields = [:]
        ConsoleResponse.secure(&headers)
        throw Problem(.notFound, "not-found", "console: \(request.method) \(request.uri.path): no such page or action", headers: headers)
    }
}

import Hummingbird

/// Refuses a request target (path and query) over 16 KiB with `414 uri-too-long`, before any
/// route reads it: no valid request of the protocol comes near it (a filter is at most 4 KiB).
struct RequestTargetLimit<Context: RequestContext>: RouterMiddleware {
    /// The longest request target accepted, in bytes.
    static var maximumBytes: Int { 16 << 10 }

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let length = request.uri.description.utf8.count
        guard length <= Self.maximumBytes else {
            throw Problem(.uriTooLong, "uri-too-long", "request target: longer than \(Self.maximumBytes) bytes (\(length) bytes)")
        }
        return try await next(request, context)
    }
}

import DeltaCore
import DeltaStore
import HTTPTypes
import Hummingbird

/// `GET /api/{collection}?wait=SECONDS` (docs/PROTOCOL.md, "Live updates"): a conditional read
/// that would answer `304` is held until a commit may have changed the answer, then answered.
extension ReadRoute {
    /// The seconds `?wait=` asks for (0 without it), at most `configuration.maximumWait`.
    func requestedWait(_ request: Request) throws -> Int {
        let values = request.uri.queryParameters[values: "wait"]
        guard let text = values.first else { return 0 }
        guard values.count == 1, let seconds = Int(text), seconds >= 0, text.utf8.count <= 6 else {
            throw Problem.badRequest(
                "invalid-wait",
                "wait: must be one whole number of seconds, 0 to \(configuration.maximumWait) (got \(String(reflecting: String(text.prefix(20)))))")
        }
        return min(seconds, configuration.maximumWait)
    }

    /// Holds a request that was answered `304` for up to `seconds`: each time the database's head
    /// moves (and once at the first tick), the request is answered again (`answer`); the first
    /// answer that is not `304` is returned, or, at the deadline, the answer of that moment.
    func waitForChange(_ seconds: Int, answer: () async throws -> Response) async throws -> Response {
        guard longPoll.admits() else {
            throw Problem(
                .serviceUnavailable, "too-many-waiting", "wait: \(longPoll.maximumWaiting) requests are already waiting; try again shortly",
                headers: [.retryAfter: "1"])
        }
        let deadline = ContinuousClock.now + .seconds(seconds)
        var seen: UInt64?
        while let head = await longPoll.next(after: seen, until: deadline) {
            seen = head
            let response = try await answer()
            guard response.status == .notModified else { return response }
        }
        return try await answer()
    }
}

import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// An answer held in memory: small by construction (a push's answer is bounded by its batch).
struct Posted: Sendable {
    /// The HTTP status.
    let status: Int
    /// The response headers, by lowercased name.
    let headers: [String: String]
    /// The body.
    let body: Data
}

extension Fetcher {
    /// Sends `POST url` with a JSON body and `Authorization: Bearer key`; throws `.network` when no answer arrives.
    func post(_ url: URL, json: [UInt8], key: String?) async throws -> Posted {
        var request = URLRequest(url: url)
        request.httpMethod = "POST"
        request.cachePolicy = .reloadIgnoringLocalCacheData
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        request.setValue("application/json", forHTTPHeaderField: "Accept")
        if let key { request.setValue("Bearer \(key)", forHTTPHeaderField: "Authorization") }
        // No `Expect: 100-continue` (curl adds it to large bodies on Linux): it costs a round trip
        // per push, and a server that refuses the body says so in its answer anyway.
        request.setValue("", forHTTPHeaderField: "Expect")
        request.httpBody = Data(json)
        return try await answer(to: request)
    }

    /// Sends `request` (every cache off, its credential set); its answer, body in memory.
    func answer(to request: URLRequest) async throws -> Posted {
        let url = request.url ?? URL(fileURLWithPath: "/")
        return try await perform { (continuation: CheckedContinuation<Posted, any Error>) in
            session.dataTask(with: request) { data, response, error in
                continuation.resume(
                    with: Result {
                        let (status, headers) = try Self.answer(response, error, url: url)
                        return Posted(status: status, headers: headers, body: data ?? Data())
                    })
            }
        }
    }
}

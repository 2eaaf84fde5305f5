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
        request.httpBody = Data(json)
        let running = TaskBox()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Posted, any Error>) in
                let task = session.dataTask(with: request) { data, response, error in
                    if let error {
                        continuation.resume(throwing: Self.failure(error, url: url))
                        return
                    }
                    guard let http = response as? HTTPURLResponse else {
                        continuation.resume(throwing: ReplicaError(.network, "no HTTP answer", evidence: url.absoluteString))
                        return
                    }
                    var headers: [String: String] = [:]
                    for (name, value) in http.allHeaderFields {
                        if let name = name as? String, let value = value as? String { headers[name.lowercased()] = value }
                    }
                    continuation.resume(returning: Posted(status: http.statusCode, headers: headers, body: data ?? Data()))
                }
                running.set(task)
                task.resume()
            }
        } onCancel: {
            running.cancel()
        }
    }
}

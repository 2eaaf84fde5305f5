import DeltaCore
import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

extension Fetcher {
    /// `PUT url` with the file's bytes, streamed from disk, as `type`, and `Authorization:
    /// Bearer key`; throws `.network` when no answer arrives.
    func upload(_ file: URL, to url: URL, type: String, key: String?) async throws -> Posted {
        var request = URLRequest(url: url)
        request.httpMethod = "PUT"
        request.cachePolicy = .reloadIgnoringLocalCacheData
        request.setValue(type, forHTTPHeaderField: "Content-Type")
        if let key { request.setValue("Bearer \(key)", forHTTPHeaderField: "Authorization") }
        return try await perform { (continuation: CheckedContinuation<Posted, any Error>) in
            session.uploadTask(with: request, fromFile: file) { data, response, error in
                continuation.resume(
                    with: Result {
                        let (status, headers) = try Self.answer(response, error, url: url)
                        return Posted(status: status, headers: headers, body: data ?? Data())
                    })
            }
        }
    }

    /// `PUT url` with `If-None-Match: *` and no bytes: `412` when the server already holds the
    /// blob for this credential (nothing to send), anything else when it does not.
    func probe(_ url: URL, key: String?) async throws -> Int {
        var request = URLRequest(url: url)
        request.httpMethod = "PUT"
        request.cachePolicy = .reloadIgnoringLocalCacheData
        request.setValue("*", forHTTPHeaderField: "If-None-Match")
        request.setValue("application/octet-stream", forHTTPHeaderField: "Content-Type")
        if let key { request.setValue("Bearer \(key)", forHTTPHeaderField: "Authorization") }
        request.httpBody = Data()
        return try await perform { (continuation: CheckedContinuation<Int, any Error>) in
            session.dataTask(with: request) { _, response, error in
                continuation.resume(with: Result { try Self.answer(response, error, url: url).status })
            }
        }
    }

    /// `GET url` into a temporary file (bounded memory), with `Authorization: Bearer key`.
    func download(_ url: URL, key: String?) async throws -> Fetched {
        var request = URLRequest(url: url)
        request.cachePolicy = .reloadIgnoringLocalCacheData
        if let key { request.setValue("Bearer \(key)", forHTTPHeaderField: "Authorization") }
        return try await download(request, url: url)
    }
}

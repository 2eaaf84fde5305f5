import DeltaCore
import DeltaSQLite
import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// One answer from the server, its body in a temporary file (deleted by `discard`).
struct Fetched: Sendable {
    /// The HTTP status.
    let status: Int
    /// The response headers that matter here, by lowercased name.
    var headers: [String: String]
    /// The body as URLSession stored it.
    let body: URL
    /// The `Delta-Last-Mutation` that came with the answer (or with the `307` that led to it):
    /// which of the client's writes the answer's data holds. Only when the pull named its client.
    var lastMutation: UInt64?

    /// A header by name (case-insensitive).
    func header(_ name: String) -> String? { headers[name.lowercased()] }

    /// The first bytes of the body, for error messages.
    func excerpt() -> String {
        guard let handle = FileHandle(forReadingAtPath: body.path), let data = try? handle.read(upToCount: 300) else { return "" }
        try? handle.close()
        return String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// Removes the temporary file.
    func discard() { try? FileManager.default.removeItem(at: body) }

    /// A problem answer's name (`token-expired` for `urn:deltasnap:problem:token-expired`), nil for other answers.
    var problemType: String? {
        guard header("content-type")?.hasPrefix("application/problem+json") == true, let text = Optional(excerpt()),
            let range = text.range(of: "urn:deltasnap:problem:")
        else { return nil }
        return String(text[range.upperBound...].prefix { $0 != "\"" })
    }

    /// Set by `Fetcher.get` on the answer of a cacheable read a `307` that depends on who asks led
    /// to (a user's `307` to a granted read): that answer itself is public and says nothing of the user.
    var redirectedPrivately = false

    /// Whether the answer depends on who asks, a collection under the server's rules: `Vary:
    /// Authorization` or `Cache-Control: private`, an `ETag` issued to a user's read (its token
    /// carries a user mark), or a `307` with either that led to it (`redirectedPrivately`).
    var isPrivate: Bool {
        if redirectedPrivately { return true }
        if header("vary")?.lowercased().contains("authorization") == true { return true }
        if header("cache-control")?.lowercased().contains("private") == true { return true }
        return header("etag").flatMap { try? Token(entityTag: $0) }?.selection?.user != nil
    }
}

/// Sends `GET /api/{collection}` through URLSession with every cache off, so that the platform
/// never adds its own validators or turns a `304` into a cached `200`. The body is streamed to a
/// temporary file (bounded memory), and applied from there.
final class Fetcher: Sendable {
    let session: URLSession
    /// This install's client id, which a pull sends as `Delta-Client` when the replica waits for
    /// it to confirm some of its writes (a sign-out changes it).
    let client: Locked<String?>
    /// The signed-in user's token source, when the replica has one.
    let credentials: Credentials?
    /// Blob uploads and downloads, streamed.
    let blobSession: BlobSession

    /// A fetcher whose requests time out after `timeout` seconds without data.
    init(timeout: TimeInterval, client: String? = nil, credentials: Credentials? = nil) {
        self.client = Locked(client)
        self.credentials = credentials
        session = URLSession(configuration: Self.configuration(timeout: timeout), delegate: CacheableRedirects(), delegateQueue: nil)
        blobSession = BlobSession(timeout: timeout)
    }

    /// Every cache and cookie store off, requests timing out after `timeout` seconds without data:
    /// the configuration of every session the replica uses.
    static func configuration(timeout: TimeInterval) -> URLSessionConfiguration {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.urlCache = nil
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
        configuration.httpCookieStorage = nil
        configuration.timeoutIntervalForRequest = timeout
        return configuration
    }

    deinit {
        session.invalidateAndCancel()
        blobSession.invalidate()
    }

    /// Sends one request, with the validators when given, `Delta-Redirect` when `redirect`, and
    /// `Delta-Client` when `confirming` (other pulls stay plain conditional requests, which the
    /// server answers on its fastest path); throws `.network` when no answer arrives.
    func send(_ url: URL, validators: CollectionState?, redirect: Bool, bearer: String? = nil, confirming: Bool = false) async throws -> Fetched {
        var request = URLRequest(url: url)
        request.cachePolicy = .reloadIgnoringLocalCacheData
        request.setValue("application/json", forHTTPHeaderField: "Accept")
        request.setValue("gzip", forHTTPHeaderField: "Accept-Encoding")
        if redirect { request.setValue("1", forHTTPHeaderField: DeltaHeader.redirect) }
        if confirming, let client = client.withLock({ $0 }) {
            request.setValue(client, forHTTPHeaderField: DeltaHeader.client)
        }
        if let bearer { request.setValue("Bearer \(bearer)", forHTTPHeaderField: "Authorization") }
        if let validators {
            request.setValue(validators.entityTag, forHTTPHeaderField: "If-None-Match")
            request.setValue(validators.lastModified, forHTTPHeaderField: "If-Modified-Since")
        }
        return try await download(request, url: url)
    }

    /// Runs `request`, its body streamed to a temporary file (bounded memory).
    func download(_ request: URLRequest, url: URL) async throws -> Fetched {
        let kept = FileManager.default.temporaryDirectory.appendingPathComponent("deltaclient-\(UUID().uuidString)")
        return try await perform { (continuation: CheckedContinuation<Fetched, any Error>) in
            session.downloadTask(with: request) { location, response, error in
                continuation.resume(
                    with: Result {
                        let (status, headers) = try Self.answer(response, error, url: url)
                        do {
                            if let location {
                                try FileManager.default.moveItem(at: location, to: kept)
                            } else {
                                _ = FileManager.default.createFile(atPath: kept.path, contents: nil)
                            }
                        } catch {
                            throw ReplicaError(.store, "cannot keep the downloaded answer", evidence: "\(error)")
                        }
                        let lastMutation = headers[DeltaHeader.lastMutation.lowercased()].flatMap { UInt64($0) }
                        return Fetched(status: status, headers: headers, body: kept, lastMutation: lastMutation)
                    })
            }
        }
    }

    /// Runs the task `make` creates; cancelling the caller cancels the transfer.
    func perform<T: Sendable>(_ make: (CheckedContinuation<T, any Error>) -> URLSessionTask) async throws -> T {
        let running = TaskBox()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                let task = make(continuation)
                running.set(task)
                task.resume()
            }
        } onCancel: {
            running.cancel()
        }
    }

    /// A finished transfer's status and headers (by lowercased name), or why there is none.
    static func answer(_ response: URLResponse?, _ error: (any Error)?, url: URL) throws -> (status: Int, headers: [String: String]) {
        if let error { throw failure(error, url: url) }
        guard let http = response as? HTTPURLResponse else { throw ReplicaError(.network, "no HTTP answer", evidence: url.absoluteString) }
        var headers: [String: String] = [:]
        for (name, value) in http.allHeaderFields {
            if let name = name as? String, let value = value as? String { headers[name.lowercased()] = value }
        }
        return (http.statusCode, headers)
    }
}

extension Fetcher {
    /// What a failed transfer means: cancelled, a body the HTTP stack could not decode (the
    /// answer's fault: reset), or anything else (the network's fault: keep the data, retry later).
    static func failure(_ error: any Error, url: URL) -> any Error {
        let code = (error as? URLError)?.code
        if code == .cancelled { return CancellationError() }
        let detail = "\(url.absoluteString): \(error.localizedDescription)"
        // Apple's URLSession reports a bad Content-Encoding with its own codes; swift-corelibs-foundation
        // passes curl's CURLE_BAD_CONTENT_ENCODING on as an unknown error with curl's message.
        if code == .cannotDecodeContentData || code == .cannotDecodeRawData || error.localizedDescription.contains("content unencoding") {
            return UndecodableTransfer(detail: detail)
        }
        return ReplicaError(.network, "no answer from the server", evidence: detail)
    }
}

/// The server answered, but the HTTP stack could not decode the body (corrupt gzip, say).
struct UndecodableTransfer: Error {
    let detail: String
}

/// The running task, so that cancelling the caller cancels the transfer, even one cancelled
/// before its transfer started.
final class TaskBox: @unchecked Sendable {
    private let lock = NSLock()
    private var task: URLSessionTask?
    private var cancelled = false

    func set(_ task: URLSessionTask) {
        lock.lock()
        self.task = task
        let cancelNow = cancelled
        lock.unlock()
        if cancelNow { task.cancel() }
    }

    func cancel() {
        lock.lock()
        cancelled = true
        let task = self.task
        lock.unlock()
        task?.cancel()
    }
}

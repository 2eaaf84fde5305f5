import DeltaCore
import DeltaSQLite
import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Blob uploads and downloads through a delegate, so that their bytes stream: a download's go
/// to a file as they arrive (after what it already holds, when the server answers a `Range`
/// with `206`), and both report progress as they go. Every cache is off, as for `Fetcher`. An
/// answer's body is kept (at most 64 KiB) only when it is not written to the file: a problem, or
/// an upload's reference.
final class BlobSession: NSObject, URLSessionDataDelegate, @unchecked Sendable {
    /// One transfer in flight, touched only on the session's delegate queue (and at its start).
    private final class Transfer {
        let continuation: CheckedContinuation<Posted, any Error>
        /// Where a download's bytes go, and from which offset they were asked for.
        let file: FileHandle?
        let offset: Int64
        let progress: @Sendable (Int64, Int64?) -> Void
        var status = 0
        var headers: [String: String] = [:]
        var writing = false
        var written: Int64 = 0
        var total: Int64?
        var body = Data()
        var failure: (any Error)?

        init(
            _ continuation: CheckedContinuation<Posted, any Error>, file: FileHandle?, offset: Int64, progress: @escaping @Sendable (Int64, Int64?) -> Void
        ) {
            self.continuation = continuation
            self.file = file
            self.offset = offset
            self.progress = progress
        }
    }

    private let transfers = Locked<[Int: Transfer]>([:])
    private let delegateQueue = OperationQueue()
    private(set) var session: URLSession!

    /// A session whose requests time out after `timeout` seconds without data.
    init(timeout: TimeInterval) {
        super.init()
        delegateQueue.maxConcurrentOperationCount = 1
        let configuration = URLSessionConfiguration.ephemeral
        configuration.urlCache = nil
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
        configuration.httpCookieStorage = nil
        configuration.timeoutIntervalForRequest = timeout
        session = URLSession(configuration: configuration, delegate: self, delegateQueue: delegateQueue)
    }

    /// Ends the session (it holds its delegate until then).
    func invalidate() { session.invalidateAndCancel() }

    /// Runs `request`; a `200` or `206` body goes into `file` (a `206` after `offset` bytes, a
    /// `200` from its start). `progress` gets the bytes the file holds and the total when known.
    func download(_ request: URLRequest, into file: FileHandle, offset: Int64, progress: @escaping @Sendable (Int64, Int64?) -> Void) async throws -> Posted {
        try await run(file: file, offset: offset, progress: progress) { self.session.dataTask(with: request) }
    }

    /// Runs `request` with `file` as its body; `progress` gets the bytes sent and the total.
    func upload(_ request: URLRequest, from file: URL, progress: @escaping @Sendable (Int64, Int64?) -> Void) async throws -> Posted {
        try await run(file: nil, offset: 0, progress: progress) { self.session.uploadTask(with: request, fromFile: file) }
    }

    private func run(
        file: FileHandle?, offset: Int64, progress: @escaping @Sendable (Int64, Int64?) -> Void, _ make: @escaping @Sendable () -> URLSessionTask
    ) async throws -> Posted {
        let started = Locked<URLSessionTask?>(nil)
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                let task = make()
                transfers.withLock { $0[task.taskIdentifier] = Transfer(continuation, file: file, offset: offset, progress: progress) }
                started.withLock { $0 = task }
                task.resume()
            }
        } onCancel: {
            started.withLock { $0 }?.cancel()
        }
    }

    private func transfer(_ task: URLSessionTask) -> Transfer? { transfers.withLock { $0[task.taskIdentifier] } }

    func urlSession(
        _ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
        completionHandler: @escaping @Sendable (URLSession.ResponseDisposition) -> Void
    ) {
        defer { completionHandler(.allow) }
        guard let transfer = transfer(dataTask), let http = response as? HTTPURLResponse else { return }
        transfer.status = http.statusCode
        for (name, value) in http.allHeaderFields {
            if let name = name as? String, let value = value as? String { transfer.headers[name.lowercased()] = value }
        }
        guard let file = transfer.file else { return }
        do {
            if http.statusCode == 206, let range = ContentRange(transfer.headers["content-range"]), range.start == transfer.offset {
                try file.truncate(atOffset: UInt64(transfer.offset))
                try file.seekToEnd()
                (transfer.writing, transfer.written, transfer.total) = (true, transfer.offset, range.size)
            } else if http.statusCode == 200 {
                try file.truncate(atOffset: 0)
                let length = http.expectedContentLength
                (transfer.writing, transfer.written, transfer.total) = (true, 0, length >= 0 ? length : nil)
            }
        } catch {
            transfer.failure = ReplicaError(.store, "cannot write a downloaded blob", evidence: "\(error)")
            dataTask.cancel()
        }
        if transfer.writing { transfer.progress(transfer.written, transfer.total) }
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        guard let transfer = transfer(dataTask), transfer.failure == nil else { return }
        guard transfer.writing, let file = transfer.file else {
            if transfer.body.count < 1 << 16 { transfer.body.append(data.prefix((1 << 16) - transfer.body.count)) }
            return
        }
        do { try file.write(contentsOf: data) } catch {
            transfer.failure = ReplicaError(.store, "cannot write a downloaded blob", evidence: "\(error)")
            dataTask.cancel()
            return
        }
        transfer.written += Int64(data.count)
        transfer.progress(transfer.written, transfer.total)
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didSendBodyData bytesSent: Int64, totalBytesSent: Int64, totalBytesExpectedToSend: Int64) {
        transfer(task)?.progress(totalBytesSent, totalBytesExpectedToSend >= 0 ? totalBytesExpectedToSend : nil)
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        guard let transfer = transfers.withLock({ $0.removeValue(forKey: task.taskIdentifier) }) else { return }
        let url = task.originalRequest?.url ?? URL(fileURLWithPath: "/")
        if let failure = transfer.failure {
            transfer.continuation.resume(throwing: failure)
        } else if let error {
            transfer.continuation.resume(throwing: Fetcher.failure(error, url: url))
        } else if transfer.status == 0 {
            transfer.continuation.resume(throwing: ReplicaError(.network, "no HTTP answer", evidence: url.absoluteString))
        } else {
            transfer.continuation.resume(returning: Posted(status: transfer.status, headers: transfer.headers, body: transfer.body))
        }
    }
}

/// `Content-Range: bytes START-END/SIZE` (RFC 9110), as a `206` carries it.
struct ContentRange: Equatable {
    let start: Int64
    let end: Int64
    let size: Int64

    /// Parses the header; nil for anything else (`*` sizes, other units).
    init?(_ text: String?) {
        guard let text, text.hasPrefix("bytes ") else { return nil }
        let parts = text.dropFirst(6).split(separator: "/", maxSplits: 1)
        guard parts.count == 2, let size = Int64(parts[1]) else { return nil }
        let bounds = parts[0].split(separator: "-", maxSplits: 1)
        guard bounds.count == 2, let start = Int64(bounds[0]), let end = Int64(bounds[1]), start <= end, end < size else { return nil }
        (self.start, self.end, self.size) = (start, end, size)
    }
}

import DeltaCore
import DeltaSQLite
import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Blob uploads and downloads through a delegate, so that both report progress as they go. A
/// download is a download task: URLSession writes its body to a file as it arrives, pausing the
/// connection while the disk is behind, so memory stays bounded whatever the size (a data
/// task's delegate gets every piece queued, however far behind it is). Every cache is off, as
/// for `Fetcher`. An upload's answer body is kept (at most 64 KiB); a download's is in its file.
final class BlobSession: NSObject, URLSessionDataDelegate, URLSessionDownloadDelegate, @unchecked Sendable {
    /// One transfer in flight.
    private final class Transfer: @unchecked Sendable {
        let continuation: CheckedContinuation<Posted, any Error>
        /// Where a download's body goes once it is whole.
        let kept: URL?
        let progress: @Sendable (Int64, Int64?) -> Void
        /// A new stream of an upload's body, when it is streamed (URLSession may ask again).
        let bodyStream: (@Sendable () -> InputStream?)?
        var body = Data()
        var failure: (any Error)?

        init(
            _ continuation: CheckedContinuation<Posted, any Error>, kept: URL?, bodyStream: (@Sendable () -> InputStream?)?,
            progress: @escaping @Sendable (Int64, Int64?) -> Void
        ) {
            self.continuation = continuation
            self.kept = kept
            self.bodyStream = bodyStream
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
        session = URLSession(configuration: Fetcher.configuration(timeout: timeout), delegate: self, delegateQueue: delegateQueue)
    }

    /// Ends the session (it holds its delegate until then).
    func invalidate() { session.invalidateAndCancel() }

    /// Runs `request`, its body into the file `kept` (whatever the status); `progress` gets the
    /// bytes written so far and the total when known.
    func download(_ request: URLRequest, into kept: URL, progress: @escaping @Sendable (Int64, Int64?) -> Void) async throws -> Posted {
        try await run(kept: kept, progress: progress) { self.session.downloadTask(with: request) }
    }

    /// Runs `request` with `file` as its body; `progress` gets the bytes sent and the total.
    func upload(_ request: URLRequest, from file: URL, progress: @escaping @Sendable (Int64, Int64?) -> Void) async throws -> Posted {
        try await run(kept: nil, progress: progress) { self.session.uploadTask(with: request, fromFile: file) }
    }

    /// Runs `request` with the bytes of `file` from `offset` on as its body, streamed from disk
    /// (chunked); `progress` gets the bytes sent and the total.
    func upload(_ request: URLRequest, from file: URL, at offset: Int64, progress: @escaping @Sendable (Int64, Int64?) -> Void) async throws -> Posted {
        let stream: @Sendable () -> InputStream? = {
            guard let stream = InputStream(url: file), stream.setProperty(NSNumber(value: offset), forKey: .fileCurrentOffsetKey) else { return nil }
            return stream
        }
        var request = request
        request.httpBodyStream = stream()
        let streamed = request
        return try await run(kept: nil, bodyStream: stream, progress: progress) { self.session.uploadTask(withStreamedRequest: streamed) }
    }

    private func run(
        kept: URL?, bodyStream: (@Sendable () -> InputStream?)? = nil, progress: @escaping @Sendable (Int64, Int64?) -> Void,
        _ make: @escaping @Sendable () -> URLSessionTask
    ) async throws -> Posted {
        let running = TaskBox()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                let task = make()
                transfers.withLock { $0[task.taskIdentifier] = Transfer(continuation, kept: kept, bodyStream: bodyStream, progress: progress) }
                running.set(task)
                task.resume()
            }
        } onCancel: {
            running.cancel()
        }
    }

    private func transfer(_ task: URLSessionTask) -> Transfer? { transfers.withLock { $0[task.taskIdentifier] } }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        guard let transfer = transfer(dataTask), transfer.body.count < 1 << 16 else { return }
        transfer.body.append(data.prefix((1 << 16) - transfer.body.count))
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, needNewBodyStream completionHandler: @escaping (InputStream?) -> Void) {
        completionHandler(transfer(task)?.bodyStream?())
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didSendBodyData bytesSent: Int64, totalBytesSent: Int64, totalBytesExpectedToSend: Int64) {
        transfer(task)?.progress(totalBytesSent, totalBytesExpectedToSend >= 0 ? totalBytesExpectedToSend : nil)
    }

    func urlSession(
        _ session: URLSession, downloadTask: URLSessionDownloadTask, didWriteData bytesWritten: Int64, totalBytesWritten: Int64,
        totalBytesExpectedToWrite: Int64
    ) {
        transfer(downloadTask)?.progress(totalBytesWritten, totalBytesExpectedToWrite >= 0 ? totalBytesExpectedToWrite : nil)
    }

    func urlSession(_ session: URLSession, downloadTask: URLSessionDownloadTask, didFinishDownloadingTo location: URL) {
        guard let transfer = transfer(downloadTask), let kept = transfer.kept else { return }
        do {
            try PartialFile.take(location, as: kept)
        } catch {
            transfer.failure = ReplicaError(.store, "cannot keep a downloaded blob", evidence: "\(error)")
        }
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        guard let transfer = transfers.withLock({ $0.removeValue(forKey: task.taskIdentifier) }) else { return }
        let url = task.originalRequest?.url ?? URL(fileURLWithPath: "/")
        if let failure = transfer.failure {
            transfer.continuation.resume(throwing: failure)
        } else if let error {
            transfer.continuation.resume(throwing: Fetcher.failure(error, url: url))
        } else if let http = task.response as? HTTPURLResponse {
            var headers: [String: String] = [:]
            for (name, value) in http.allHeaderFields {
                if let name = name as? String, let value = value as? String { headers[name.lowercased()] = value }
            }
            var body = transfer.body
            // A refused download's problem is in its file: keep its start, as for other answers.
            if http.statusCode >= 300, let kept = transfer.kept, let handle = try? FileHandle(forReadingFrom: kept) {
                body = (try? handle.read(upToCount: 1 << 16)) ?? Data()
                try? handle.close()
            }
            transfer.continuation.resume(returning: Posted(status: http.statusCode, headers: headers, body: body))
        } else {
            transfer.continuation.resume(throwing: ReplicaError(.network, "no HTTP answer", evidence: url.absoluteString))
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

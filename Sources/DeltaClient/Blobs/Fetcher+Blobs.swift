import DeltaCore
import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

extension Fetcher {
    /// `PUT url` with the file's bytes, streamed from disk, as `type`, and `Authorization:
    /// Bearer key`; from `offset` on with `Upload-Offset` when above 0, to resume
    /// an upload the server kept that much of. `progress` gets the bytes sent by this request.
    /// Throws `.network` when no answer arrives.
    func upload(
        _ file: URL, from offset: Int64 = 0, to url: URL, type: String, key: String?, progress: @escaping @Sendable (Int64, Int64?) -> Void
    ) async throws -> Posted {
        var request = URLRequest(url: url)
        request.httpMethod = "PUT"
        request.cachePolicy = .reloadIgnoringLocalCacheData
        request.setValue(type, forHTTPHeaderField: "Content-Type")
        if let key { request.setValue("Bearer \(key)", forHTTPHeaderField: "Authorization") }
        guard offset > 0 else { return try await blobSession.upload(request, from: file, progress: progress) }
        // No Content-Length: a streamed body goes chunked (swift-corelibs-foundation adds
        // `Transfer-Encoding: chunked` whatever the request says, and both would be refused).
        request.setValue(String(offset), forHTTPHeaderField: "Upload-Offset")
        return try await blobSession.upload(request, from: file, at: offset, progress: progress)
    }

    /// `HEAD url/upload`: how many bytes of an interrupted upload of the blob the server kept
    /// for this credential, in `Upload-Offset` (`Posted.keptBytes`).
    func keptUpload(_ url: URL, key: String?) async throws -> Posted {
        var request = URLRequest(url: url.appendingPathComponent("upload"))
        request.httpMethod = "HEAD"
        request.cachePolicy = .reloadIgnoringLocalCacheData
        if let key { request.setValue("Bearer \(key)", forHTTPHeaderField: "Authorization") }
        return try await answer(to: request)
    }

    /// `PUT url` with `If-None-Match: *` and no bytes: `412` when the server already holds the
    /// blob for this credential (nothing to send), anything else when it does not.
    func probe(_ url: URL, key: String?) async throws -> Posted {
        var request = URLRequest(url: url)
        request.httpMethod = "PUT"
        request.cachePolicy = .reloadIgnoringLocalCacheData
        request.setValue("*", forHTTPHeaderField: "If-None-Match")
        request.setValue("application/octet-stream", forHTTPHeaderField: "Content-Type")
        if let key { request.setValue("Bearer \(key)", forHTTPHeaderField: "Authorization") }
        request.httpBody = Data()
        return try await answer(to: request)
    }

    /// `GET url` (one `range` of it, valid only for this blob: `If-Range`) into the file `kept`,
    /// written as it arrives; `progress` gets the bytes written so far.
    func downloadBlob(
        _ url: URL, hash: BlobHash, key: String?, range: ClosedRange<Int64>?, into kept: URL, progress: @escaping @Sendable (Int64, Int64?) -> Void
    ) async throws -> Posted {
        var request = URLRequest(url: url)
        request.cachePolicy = .reloadIgnoringLocalCacheData
        if let key { request.setValue("Bearer \(key)", forHTTPHeaderField: "Authorization") }
        if let range {
            request.setValue("bytes=\(range.lowerBound)-\(range.upperBound)", forHTTPHeaderField: "Range")
            request.setValue("\"\(hash.hex)\"", forHTTPHeaderField: "If-Range")
        }
        return try await blobSession.download(request, into: kept, progress: progress)
    }
}

extension Posted {
    /// A `204`'s `Upload-Offset` (`Fetcher.keptUpload`); 0 for any other answer.
    var keptBytes: Int64 {
        guard status == 204, let kept = headers["upload-offset"].flatMap({ Int64($0) }), kept >= 0 else { return 0 }
        return kept
    }
}

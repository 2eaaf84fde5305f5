import DeltaCore
import DeltaRules
import DeltaStore
import HTTPTypes
import Hummingbird
import NIOCore
import Prometheus

/// `PUT`, `GET` and `HEAD /blobs/{sha256}` (docs/PROTOCOL.md, "Files"): content-addressed bytes
/// beside the records. An upload is hashed while it streams to the store and refused when its
/// bytes are not its name (`422 blob-hash`); nothing is visible until it is whole. Reads follow
/// `BlobAccess`, support one `Range`, and are immutable: the name is the content.
struct BlobRoute: RulesPinned {
    let store: any ChangeReader & BlobStore
    /// The settings; `rules` pinned for each request (`RulesPinned`).
    var configuration: ServerConfiguration
    let metrics: ServerMetrics
    /// Whether the channel has `BlobFileBody`, which sends a file's range with `sendfile`
    /// (false for the router alone, in-process).
    let sendFile: Bool

    /// How many bytes a download reads from the store at a time, when it does not send a file
    /// (PostgreSQL): 256 KiB per query answered no faster than 64 KiB (376 and 383 1 MiB blobs a
    /// second), and larger pieces, above glibc's mmap threshold, cost page faults.
    static let chunkBytes = 1 << 16
    /// The pieces an upload's body is handed to the store in.
    static let uploadPiece = 1 << 20

    /// Stores the body under its hash and answers the reference a record puts in a member. The
    /// same bytes again answer the same. Needs a credential that may write: the owner's secret,
    /// the client key, or a user's token.
    func put(_ request: Request, context: some RequestContext, credential: Credential) async throws -> Response {
        let hash = try blobHash(context)
        let limit = configuration.maximumBlobBytes
        let offset = try uploadOffset(request)
        let length = request.headers[.contentLength].flatMap { Int64($0) }
        if let length, length > limit - offset {
            throw Problem(
                .contentTooLarge, "too-large", "blob \(hash): larger than the server accepts (\(offset + length) bytes, --max-blob-size \(limit))")
        }
        let type = try mediaType(request.headers[.contentType])
        var uploader: String?
        if case .user(let claims) = credential { uploader = claims.subject }
        // "Only if you do not hold it": answered before any byte of the body is read. A user is
        // told only of blobs they uploaded themselves (the owner and apps may reference any blob
        // held, so may know of it).
        if request.headers[.ifNoneMatch]?.trimmingWhitespace == "*", try await store.holds(hash, uploadedBy: uploader) {
            throw Problem(
                .preconditionFailed, "precondition-failed", "blob \(hash): already stored (If-None-Match: *): nothing to upload",
                headers: [.eTag: "\"\(hash.hex)\""])
        }
        // A `409 upload-offset` (`Problem`) when `offset` is not what the server kept.
        let upload = try await store.beginUpload(
            hash, type: type, maximumBytes: limit, uploader: uploader, holder: credential.uploadHolder, offset: offset)
        let stored: StoredBlob
        do {
            // The body's buffers are small (tens of KiB): gathered into 1 MiB pieces, the store
            // writes and hashes a hundred times per 100 MiB instead of thousands.
            var piece: [UInt8] = []
            piece.reserveCapacity(Self.uploadPiece + (64 << 10))
            var body = request.body.makeAsyncIterator()
            var received: Int64 = 0
            while let buffer = try await nextPiece(&body, upload, &piece) {
                piece.append(contentsOf: buffer.readableBytesView)
                received += Int64(buffer.readableBytes)
                if piece.count >= Self.uploadPiece {
                    try await upload.write(piece)
                    piece = []
                    piece.reserveCapacity(Self.uploadPiece + (64 << 10))
                }
            }
            if !piece.isEmpty { try await upload.write(piece) }
            if let length, received < length {
                // The body ended early without an error from the connection: keep what came.
                await upload.suspend()
                throw Problem(.badRequest, "upload-incomplete", "blob \(hash): the body ended after \(received) of its \(length) bytes (Content-Length)")
            }
            stored = try await upload.finish()
        } catch {
            await upload.cancel()
            throw error
        }
        metrics.blobs.uploads.increment()
        if offset > 0 { metrics.blobs.resumedUploads.increment() }
        metrics.blobs.uploadedBytes.increment(by: stored.size)
        var bytes = stored.reference.json.canonicalBytes
        bytes.append(UInt8(ascii: "\n"))
        return Response(
            status: .ok,
            headers: [.contentType: "application/json", .cacheControl: "no-store", .eTag: "\"\(hash.hex)\"", .contentLength: String(bytes.count)],
            body: .init(byteBuffer: ByteBuffer(bytes: bytes)))
    }

    /// The blob, or the part of it one `Range` asks for, to a reader `BlobAccess` allows.
    func get(_ request: Request, context: some RequestContext, caller: Caller, headOnly: Bool = false) async throws -> Response {
        let hash = try blobHash(context)
        let missing = Problem(.notFound, "not-found", "blob \(hash): does not exist")
        let (verdict, found) = try await BlobAccess(store: store, configuration: configuration).verdict(caller, hash)
        guard verdict != .nobody else { throw missing }
        var blob = found
        if blob == nil { blob = try await store.blob(hash) }
        guard let blob else { throw missing }
        let etag = "\"\(hash.hex)\""
        var headers: HTTPFields = [
            .eTag: etag, .acceptRanges: "bytes",
            .cacheControl: verdict == .everyone ? "public, max-age=31536000, immutable" : "private, max-age=31536000, immutable",
            // The type is the uploader's: never let a browser run it as a page of this origin.
            HTTPField.Name("X-Content-Type-Options")!: "nosniff",
            .contentSecurityPolicy: "default-src 'none'; sandbox",
        ]
        if verdict != .everyone { headers[.vary] = "Authorization" }
        if request.headers[.ifNoneMatch]?.split(separator: ",").contains(where: {
            String($0).trimmingWhitespace == etag || String($0).trimmingWhitespace == "*"
        }) == true {
            return Response(status: .notModified, headers: headers)
        }
        // A Range counts only when If-Range, if sent, names this blob (a date never does: blobs have none).
        let ranged = request.headers[.ifRange].map { $0.trimmingWhitespace == etag } ?? true
        let range = ByteRange(header: ranged ? request.headers[.range] : nil, size: blob.size)
        let status: HTTPResponse.Status
        let bytes: Range<Int64>
        switch range {
        case .whole:
            (status, bytes) = (.ok, 0..<blob.size)
        case .part(let part):
            (status, bytes) = (.partialContent, part)
            headers[.contentRange] = "bytes \(part.lowerBound)-\(part.upperBound - 1)/\(blob.size)"
        case .unsatisfiable:
            headers[.contentRange] = "bytes */\(blob.size)"
            throw Problem(
                .rangeNotSatisfiable, "range-not-satisfiable",
                "blob \(hash): the range asked for is outside its \(blob.size) bytes (\(request.headers[.range] ?? ""))",
                headers: headers)
        }
        headers[.contentType] = blob.type
        headers[.contentLength] = String(bytes.count)
        if headOnly { return Response(status: status, headers: headers) }
        metrics.blobs.downloads.increment()
        metrics.blobs.downloadedBytes.increment(by: Int64(bytes.count))
        // A copy this instance keeps of a blob the database holds (`--blob-cache`): no query.
        if sendFile, !bytes.isEmpty, let file = configuration.blobCache?.file(hash, size: blob.size) {
            metrics.blobs.cacheHits.increment()
            return fileResponse(status, headers, file, bytes)
        }
        guard let reading = try await store.openBlob(hash, range: bytes) else { throw missing }
        if sendFile, let file = reading.localFile, !bytes.isEmpty {
            reading.close()
            return fileResponse(status, headers, file, bytes)
        }
        // A whole blob read from the database is copied into the cache as it goes out.
        let fill = bytes == 0..<blob.size ? configuration.blobCache?.fill(hash, size: blob.size) : nil
        return Response(
            status: status, headers: headers,
            body: ResponseBody { writer in
                defer {
                    reading.close()
                    fill?.cancel()
                }
                while let chunk = try await reading.next(maximumBytes: Self.chunkBytes) {
                    try await writer.write(ByteBuffer(bytes: chunk))
                    fill?.write(chunk)
                }
                try await writer.finish(nil)
                fill?.finish()
            })
    }

    /// An answer whose body the kernel sends from `file` (`BlobFileBody`), as nginx does: 1 MiB
    /// blobs went from 1,978 a second copied through the process to 3,256 (docs/decisions/2026-11-26-blob-downloads.md).
    private func fileResponse(_ status: HTTPResponse.Status, _ headers: HTTPFields, _ file: String, _ bytes: Range<Int64>) -> Response {
        var headers = headers
        headers[HTTPField.Name(BlobFileBody.marker)!] = "\(bytes.lowerBound) \(bytes.count) \(file)"
        return Response(status: status, headers: headers, body: ResponseBody(contentLength: Int(bytes.count)) { try await $0.finish(nil) })
    }

    func blobHash(_ context: some RequestContext) throws -> BlobHash {
        let text = try context.parameters.require("sha256")
        do { return try BlobHash(text) } catch let error as WireError {
            throw Problem(.badRequest, "invalid-blob-hash", error.description)
        }
    }

    /// The upload's `Content-Type`, `application/octet-stream` when it sends none.
    private func mediaType(_ header: String?) throws -> String {
        guard let header = header?.trimmingWhitespace, !header.isEmpty else { return "application/octet-stream" }
        guard BlobReference.isMediaType(header) else {
            throw Problem(
                .badRequest, "invalid-blob-type",
                "blob: Content-Type must be a media type such as image/jpeg (got \(String(reflecting: String(header.prefix(80)))))")
        }
        return header
    }
}

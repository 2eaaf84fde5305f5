import DeltaCore
import DeltaRules
import DeltaStore
import HTTPTypes
import Hummingbird
import NIOCore

/// Resumable uploads (docs/PROTOCOL.md, "Resuming an upload"): an upload whose body stops
/// before its end keeps the bytes received for the credential that sent them; `HEAD
/// /blobs/{sha256}/upload` says how many, and a `PUT` with `Upload-Offset: N` sends the rest.
extension BlobRoute {
    /// The request header naming where a `PUT`'s body starts in the blob, and the answer header
    /// saying how many bytes the server kept.
    static let uploadOffsetField = HTTPField.Name("Upload-Offset")!

    /// `HEAD /blobs/{sha256}/upload`: `204` with the bytes kept of this credential's upload of
    /// the blob in `Upload-Offset` (0 when none). Needs a credential that may upload; whether
    /// the blob itself is stored is not told here (`If-None-Match: *` on `PUT` is for that).
    func kept(_ request: Request, context: some RequestContext, credential: Credential) async throws -> Response {
        let hash = try blobHash(context)
        let kept = try await store.keptUpload(hash, holder: credential.uploadHolder)
        return Response(status: .noContent, headers: [Self.uploadOffsetField: String(kept), .cacheControl: "no-store"])
    }

    /// The `Upload-Offset` of a `PUT`: 0 when absent; `400 invalid-upload-offset` unless digits.
    func uploadOffset(_ request: Request) throws -> Int64 {
        guard let text = request.headers[Self.uploadOffsetField]?.trimmingWhitespace else { return 0 }
        guard !text.isEmpty, text.count <= 18, text.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }), let offset = Int64(text) else {
            throw Problem(
                .badRequest, "invalid-upload-offset",
                "blob: Upload-Offset must be a whole number of bytes (got \(String(reflecting: String(text.prefix(40)))))")
        }
        return offset
    }

    /// The body's next buffer; when the body fails (the connection closed before its end), the
    /// bytes gathered so far are written and the upload is kept for its holder.
    func nextPiece(_ body: inout RequestBody.AsyncIterator, _ upload: any BlobUpload, _ piece: inout [UInt8]) async throws -> ByteBuffer? {
        do {
            return try await body.next()
        } catch {
            if !piece.isEmpty, (try? await upload.write(piece)) != nil { piece = [] }
            await upload.suspend()
            throw error
        }
    }
}

extension Credential {
    /// Who an interrupted upload is kept for: each user apart, the owner, and apps (the client
    /// key) together. Whatever is kept is hashed with the rest, so bytes appended by another
    /// holder of the same credential can only make the upload fail its hash, never store wrong bytes.
    var uploadHolder: String {
        switch self {
        case .owner: "owner"
        case .client: "app"
        case .user(let claims): "user:" + claims.subject
        }
    }
}

import DeltaCore
import Foundation

extension Replica {
    /// Uploads one blob the replica holds, once. A blob whose upload was attempted before (its
    /// process ended, or the connection dropped) is first asked about: held already (`412`),
    /// nothing is sent; otherwise the upload resumes from the bytes the server kept of it
    /// (`HEAD …/upload`, then `PUT` with `Upload-Offset`), and starts over once from 0 when the
    /// server kept another number of bytes or the resumed whole does not hash to its name.
    /// Returns the server's answer when it refuses the blob for good (a `4xx` retrying cannot
    /// cure: `413 too-large`, `422 blob-hash`, …), noted so that it is not sent again; throws for
    /// the network, `429` and `5xx` (a later sync tries again), and for `401`, `403` and `408`,
    /// which refuse the credential, the server's writes or the moment, not the blob.
    func uploadBlob(_ reference: BlobReference) async throws -> String? {
        let url = configuration.blobURL(reference.hash)
        var offset: Int64 = 0
        if blobs.wasAttempted(reference.hash) {
            if try await withCredential({ [fetcher] key in try await fetcher.probe(url, key: key) }).status == 412 {
                try blobs.markUploaded(reference.hash)
                return nil
            }
            offset = try await withCredential { [fetcher] key in try await fetcher.keptUpload(url, key: key) }.keptBytes
            if offset >= reference.size { offset = 0 }
        }
        try blobs.markAttempted(reference.hash)
        defer { transfers.end(reference.hash) }
        var answer = try await sendBlob(reference, from: offset)
        if offset > 0, answer.status == 409 || answer.status == 422 {
            answer = try await sendBlob(reference, from: 0)
        }
        switch answer.status {
        case 200:
            try blobs.markUploaded(reference.hash)
            transfers.publish(BlobTransfer(hash: reference.hash, direction: .upload, bytes: reference.size, total: reference.size, isFinished: true))
            return nil
        case 429, 500...599:
            throw ReplicaError(
                .serverUnavailable, "the server cannot take a blob now; the writes stay queued",
                evidence: "HTTP \(answer.status) from \(url.absoluteString)")
        case 400...499 where ![401, 403, 408].contains(answer.status):
            // Refused for good: the writes behind it go on, and those that reference it come back
            // turned down (`invalid: blob-missing`) instead of holding every write back forever.
            let refusal = "\(reference.hash.hex): HTTP \(answer.status): \(Self.excerpt(answer.body))"
            try blobs.markRefused(reference.hash, refusal)
            return refusal
        default:
            throw ReplicaError(.refused, "the server refused a blob; the writes stay queued", evidence: "HTTP \(answer.status): \(Self.excerpt(answer.body))")
        }
    }

    /// The start of an answer's body, on one line's worth, for an error's evidence.
    private static func excerpt(_ body: Data) -> String {
        String(decoding: body.prefix(300), as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// `PUT`s the blob's bytes from `offset` on, reporting progress from there.
    private func sendBlob(_ reference: BlobReference, from offset: Int64) async throws -> Posted {
        let (url, file) = (configuration.blobURL(reference.hash), blobs.file(reference.hash))
        transfers.publish(BlobTransfer(hash: reference.hash, direction: .upload, bytes: offset, total: reference.size, isFinished: false))
        return try await withCredential { [fetcher, transfers] key in
            try await fetcher.upload(file, from: offset, to: url, type: reference.type, key: key) { sent, _ in
                transfers.publish(
                    BlobTransfer(hash: reference.hash, direction: .upload, bytes: offset + sent, total: reference.size, isFinished: false))
            }
        }
    }
}

import DeltaCore
import DeltaSQLite
import Foundation

extension Replica {
    /// A local file holding the blob `reference` names: the replica's copy, or downloaded from
    /// the server (`GET /blobs/{sha256}`, with the replica's credential) and checked against its
    /// hash and size before it is kept. Throws `.refused` when the server does not give it (`404`:
    /// missing, or not this user's to read).
    ///
    /// A download that is cut off (the network, a kill) keeps what arrived; the next call asks
    /// only for the rest (`Range`, with `If-Range` naming the blob), and starts over should the
    /// whole not match the hash.
    public func blob(_ reference: BlobReference) async throws -> URL {
        let blobs = self.blobs
        if blobs.holds(reference.hash) {
            blobs.touch(reference.hash)
            return blobs.file(reference.hash)
        }
        // One download per blob resumes its partial file; a concurrent one starts its own.
        let owns = downloading.withLock { $0.insert(reference.hash).inserted }
        defer { if owns { _ = downloading.withLock { $0.remove(reference.hash) } } }
        try blobs.make("partial")
        let partial = blobs.directory.appendingPathComponent("partial/\(reference.hash.hex)\(owns ? "" : "-\(UUID().uuidString.lowercased())").download")
        defer { if !owns { try? FileManager.default.removeItem(at: partial) } }
        let kept = try await download(reference, into: partial)
        if let budget = configuration.blobCacheBytes { blobs.evict(toFit: budget, keeping: reference.hash) }
        return kept
    }

    /// Downloads into `partial`, resuming what it holds, then checks and keeps it.
    private func download(_ reference: BlobReference, into partial: URL) async throws -> URL {
        let blobs = self.blobs
        let url = configuration.blobURL(reference.hash)
        var resume = true
        while true {
            if !FileManager.default.fileExists(atPath: partial.path) { _ = FileManager.default.createFile(atPath: partial.path, contents: nil) }
            guard let handle = try? FileHandle(forUpdating: partial) else { throw ReplicaError(.store, "cannot write a blob file", evidence: partial.path) }
            let held = Int64((try? handle.seekToEnd()) ?? 0)
            let offset = resume && held < reference.size ? held : 0
            let answer: Posted
            if held == reference.size && resume {
                answer = Posted(status: 200, headers: [:], body: Data())
            } else {
                let key = try await fetcher.credentials?.token(refreshing: false) ?? configuration.clientKey
                do {
                    answer = try await fetcher.downloadBlob(url, hash: reference.hash, key: key, into: handle, offset: offset) { [transfers] bytes, _ in
                        transfers.publish(BlobTransfer(hash: reference.hash, direction: .download, bytes: bytes, total: reference.size, isFinished: false))
                    }
                } catch {
                    try? handle.close()
                    transfers.end(reference.hash)
                    throw error
                }
            }
            try? handle.synchronize()
            try? handle.close()
            switch answer.status {
            case 200, 206: break
            case 416 where offset > 0:
                // What the partial file holds is not a start of this blob: start over.
                resume = false
                continue
            case 429, 500...599:
                throw ReplicaError(.serverUnavailable, "the server cannot send the blob now", evidence: "HTTP \(answer.status) from \(url.absoluteString)")
            default:
                try? FileManager.default.removeItem(at: partial)
                throw ReplicaError(.refused, "the server does not give this blob", evidence: "HTTP \(answer.status) from \(url.absoluteString)")
            }
            let (hash, size) = try ReplicaBlobs.digest(of: partial)
            guard hash == reference.hash, size == reference.size else {
                try? FileManager.default.truncate(partial)
                // Resumed bytes may be what does not match: once more, whole.
                if offset > 0 || held == reference.size {
                    resume = false
                    continue
                }
                transfers.end(reference.hash)
                throw ReplicaError(
                    .unusableAnswer, "the downloaded blob is not the one asked for",
                    evidence: "asked \(reference.hash) of \(reference.size) bytes, got \(hash) of \(size) bytes")
            }
            try blobs.adopt(partial, as: hash)
            // Downloaded, so the server holds it: the cache may let it go.
            try blobs.markUploaded(hash)
            transfers.publish(BlobTransfer(hash: hash, direction: .download, bytes: size, total: size, isFinished: true))
            return blobs.file(hash)
        }
    }

    /// Reports every blob upload and download of this replica as it goes (its start, its end,
    /// and in between at most every 256 KiB and 50 ms), for as long as the stream is iterated.
    public func blobTransfers() -> AsyncStream<BlobTransfer> { transfers.subscribe() }
}

extension FileManager {
    /// Empties the file at `url`, if any.
    fileprivate func truncate(_ url: URL) throws {
        guard let handle = try? FileHandle(forWritingTo: url) else { return }
        defer { try? handle.close() }
        try handle.truncate(atOffset: 0)
    }
}

import DeltaCore
import DeltaSQLite
import Foundation

extension Replica {
    /// A local file holding the blob `reference` names: the replica's copy, or downloaded from
    /// the server (`GET /blobs/{sha256}`, with the replica's credential) and checked against its
    /// hash and size before it is kept. Throws `.refused` when the server does not give it (`404`:
    /// missing, or not this user's to read).
    ///
    /// It downloads in pieces of 8 MiB (`Range`, with `If-Range` naming the blob), each written
    /// to disk as it arrives (memory stays bounded) and kept once whole: a download cut off (the
    /// network, a cancelled task, a kill) keeps its whole pieces, and the next call asks only for
    /// the rest. Should the whole not match the hash, it starts over once with one plain `GET`.
    /// A sign-out while it runs ends it with `CancellationError`: the blob the signed-out user's
    /// credential fetched is not kept.
    public func blob(_ reference: BlobReference) async throws -> URL {
        let blobs = self.blobs
        // The file system is asked off the caller's thread (the main one, in an app).
        let (held, epoch) = try await background { () -> (URL?, String) in
            if blobs.holds(reference.hash) {
                blobs.touch(reference.hash)
                return (blobs.file(reference.hash), "")
            }
            return (nil, blobs.epoch())
        }
        if let held { return held }
        // Read after the epoch: a sign-out under way may have written the epoch just read, and
        // its user's credential is still the one a request would send (it is forgotten before the
        // sign-out ends). One that begins after this check changes the epoch, which `adopt` sees.
        guard coordination.withLock({ $0.signingOut }) == 0 else { throw CancellationError() }
        // One download per blob resumes its partial file; a concurrent one starts its own.
        let owns = downloading.withLock { $0.insert(reference.hash).inserted }
        defer { if owns { _ = downloading.withLock { $0.remove(reference.hash) } } }
        try blobs.make("partial")
        let partial = blobs.directory.appendingPathComponent("partial/\(reference.hash.hex)\(owns ? "" : "-\(UUID().uuidString.lowercased())").download")
        defer { if !owns { try? FileManager.default.removeItem(at: partial) } }
        let kept = try await download(reference, into: partial, epoch: epoch)
        if let budget = configuration.blobCacheBytes { blobs.evict(toFit: budget, keeping: reference.hash) }
        return kept
    }

    /// The bytes a download asks for at a time: each piece is appended to the partial file once
    /// it is whole, so a cut loses at most one.
    static let downloadPiece: Int64 = 8 << 20

    /// Downloads into `partial` piece by piece from what it holds, then checks and keeps it.
    /// Should the whole not match, it starts over once with one plain `GET`.
    private func download(_ reference: BlobReference, into partial: URL, epoch: String) async throws -> URL {
        let blobs = self.blobs
        // A piece a kill left between its download and its append: it is downloaded again if needed.
        try? FileManager.default.removeItem(atPath: partial.path + ".piece")
        var whole = false
        while true {
            var held = PartialFile.size(partial)
            if whole || held > reference.size {
                try PartialFile.truncate(partial, to: 0)
                held = 0
            }
            var done = held == reference.size && !whole
            while !done {
                try Task.checkCancellation()
                let range = whole ? nil : held...(min(held + Self.downloadPiece, reference.size) - 1)
                guard let piece = try await downloadPiece(reference, range: range, at: held, into: partial), piece.added > 0 || piece.whole else {
                    // The server's answer does not continue what the file holds: once more, whole.
                    if whole { throw ReplicaError(.unusableAnswer, "the server's answer is not the blob asked for", evidence: reference.hash.hex) }
                    whole = true
                    break
                }
                held += piece.added
                // A 200 is the whole answer, whatever its length: the hash says whether it is the blob.
                done = piece.whole || held >= reference.size
            }
            guard done else { continue }
            let (hash, size) = try await background { try ReplicaBlobs.digest(of: partial) }
            guard hash == reference.hash, size == reference.size else {
                try PartialFile.truncate(partial, to: 0)
                transfers.end(reference.hash)
                if !whole {
                    whole = true
                    continue
                }
                throw ReplicaError(
                    .unusableAnswer, "the downloaded blob is not the one asked for",
                    evidence: "asked \(reference.hash) of \(reference.size) bytes, got \(hash) of \(size) bytes")
            }
            try await background { try PartialFile.synchronize(partial) }
            try blobs.adopt(partial, as: hash, epoch: epoch)
            // Downloaded, so the server holds it: the cache may let it go. (Not "uploaded": a user
            // who references it in a write must upload it, as the server asks of users.)
            try blobs.markDownloaded(hash)
            transfers.publish(BlobTransfer(hash: hash, direction: .download, bytes: size, total: size, isFinished: true))
            return blobs.file(hash)
        }
    }

    /// Downloads `range` (or the whole blob) and puts it in `partial` after its first `offset`
    /// bytes (or in place of it, for a `200`, which is `whole`); returns how many bytes it added,
    /// or nil when the answer does not continue the file (start over whole).
    private func downloadPiece(_ reference: BlobReference, range: ClosedRange<Int64>?, at offset: Int64, into partial: URL) async throws -> (
        added: Int64, whole: Bool
    )? {
        let url = configuration.blobURL(reference.hash)
        let piece = URL(fileURLWithPath: partial.path + ".piece")
        defer { try? FileManager.default.removeItem(at: piece) }
        let answer: Posted
        do {
            answer = try await withCredential { [fetcher, transfers] key in
                try await fetcher.downloadBlob(url, hash: reference.hash, key: key, range: range, into: piece) { written, _ in
                    transfers.publish(
                        BlobTransfer(hash: reference.hash, direction: .download, bytes: offset + written, total: reference.size, isFinished: false))
                }
            }
        } catch {
            transfers.end(reference.hash)
            throw error
        }
        // Only this credential may read it (no public row references it): it leaves with the user.
        if answer.status == 200 || answer.status == 206, answer.headers["cache-control"]?.lowercased().contains("private") == true {
            try blobs.markPrivate(reference.hash)
        }
        switch answer.status {
        case 206:
            guard let sent = ContentRange(answer.headers["content-range"]), sent.start == offset, PartialFile.size(piece) == sent.end - sent.start + 1 else {
                return nil
            }
            try await background { try PartialFile.append(piece, to: partial, at: offset) }
            return (sent.end - sent.start + 1, false)
        case 200:
            try await background { try PartialFile.append(piece, to: partial, at: 0) }
            return (PartialFile.size(partial) - offset, true)
        case 416 where range != nil:
            return nil
        case 429, 500...599:
            transfers.end(reference.hash)
            throw ReplicaError(.serverUnavailable, "the server cannot send the blob now", evidence: "HTTP \(answer.status) from \(url.absoluteString)")
        default:
            transfers.end(reference.hash)
            try? FileManager.default.removeItem(at: partial)
            throw ReplicaError(.refused, "the server does not give this blob", evidence: "HTTP \(answer.status) from \(url.absoluteString)")
        }
    }

    /// Reports every blob upload and download of this replica as it goes (its start, its end,
    /// and in between at most every 256 KiB and 50 ms), for as long as the stream is iterated.
    public func blobTransfers() -> AsyncStream<BlobTransfer> { transfers.subscribe() }
}

/// The file a download grows in, piece by piece.
enum PartialFile {
    /// Its size (0 when missing).
    static func size(_ url: URL) -> Int64 { Int64((try? FileManager.default.attributesOfItem(atPath: url.path)[.size] as? Int) ?? 0) }

    /// Cuts it to `length` bytes, creating it when missing.
    static func truncate(_ url: URL, to length: Int64) throws {
        if !FileManager.default.fileExists(atPath: url.path) { ReplicaBlobs.createEmpty(url.path) }
        guard let handle = try? FileHandle(forWritingTo: url) else { throw ReplicaError(.store, "cannot write a blob file", evidence: url.path) }
        defer { try? handle.close() }
        try handle.truncate(atOffset: UInt64(length))
    }

    /// Writes the bytes of `piece` into `url` from `offset`, 1 MiB at a time.
    static func append(_ piece: URL, to url: URL, at offset: Int64) throws {
        try truncate(url, to: offset)
        guard let input = try? FileHandle(forReadingFrom: piece), let output = try? FileHandle(forWritingTo: url) else {
            throw ReplicaError(.store, "cannot write a blob file", evidence: url.path)
        }
        defer {
            try? input.close()
            try? output.close()
        }
        do {
            try output.seekToEnd()
            while let bytes = try input.read(upToCount: 1 << 20), !bytes.isEmpty { try output.write(contentsOf: bytes) }
        } catch {
            throw ReplicaError(.store, "cannot write a blob file", evidence: "\(url.path): \(error)")
        }
    }

    /// Gives the file `location` the name `kept` (replacing it): renamed when both are on one
    /// file system, else copied into `kept` itself, so that a kill mid-copy leaves nothing but
    /// `kept`, which the next download overwrites (`FileManager.moveItem` would copy through a
    /// hidden file of its own beside it, left behind by a kill).
    static func take(_ location: URL, as kept: URL) throws {
        if rename(location.path, kept.path) == 0 { return }
        try truncate(kept, to: 0)
        try append(location, to: kept, at: 0)
        try? FileManager.default.removeItem(at: location)
    }

    /// Makes its bytes durable before it gets a blob's name.
    static func synchronize(_ url: URL) throws {
        guard let handle = try? FileHandle(forWritingTo: url) else { throw ReplicaError(.store, "cannot write a blob file", evidence: url.path) }
        defer { try? handle.close() }
        try handle.synchronize()
    }
}

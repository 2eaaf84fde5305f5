import DeltaCore
import DeltaStore
import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Resumable uploads into a blob directory. A suspended upload's file is synced and renamed to
/// `partial/kept-<holder's digest>-<hash>` (replacing an older one of the same holder and blob);
/// resuming renames it back to a file of its own, so that of two uploads resuming at once only
/// one gets it, and no two writers ever share a file whose hash is computed from the stream.
/// Kept files untouched for a day are removed by the next suspension.
extension FileBlobUpload {
    /// How long a kept upload waits for its holder.
    static let keptFor: TimeInterval = 86_400

    /// Where the upload of `hash` kept for `holder` is.
    static func keptPath(_ hash: BlobHash, holder: String, in directory: String) -> String {
        directory + "/partial/" + keptUploadName(hash, holder: holder)
    }

    /// The size of the kept upload, 0 when there is none.
    static func keptBytes(_ hash: BlobHash, holder: String, in directory: String) -> Int64 {
        var status = stat()
        return stat(keptPath(hash, holder: holder, in: directory), &status) == 0 ? Int64(status.st_size) : 0
    }

    /// The upload continuing the one kept for `holder` at `offset` (a new one at 0): its kept
    /// bytes are hashed again. `StoreError(.uploadOffset)` when `offset` is not the kept size.
    static func resume(
        _ hash: BlobHash, type: String, maximumBytes: Int64, directory: String, holder: String, offset: Int64,
        record: @escaping @Sendable (Int64) async throws -> StoredBlob
    ) async throws -> FileBlobUpload {
        guard offset > 0 else {
            return try FileBlobUpload(hash: hash, type: type, maximumBytes: maximumBytes, directory: directory, holder: holder, record: record)
        }
        let kept = keptPath(hash, holder: holder, in: directory)
        try makeDirectory(directory + "/partial")
        let claimed = directory + "/partial/" + UUID().uuidString.lowercased()
        // The rename is the claim: a concurrent resumption finds nothing and is told 0.
        guard rename(kept, claimed) == 0 else { throw StoreError.uploadOffset(hash, offset: offset, kept: 0) }
        var status = stat()
        let size = stat(claimed, &status) == 0 ? Int64(status.st_size) : 0
        guard size == offset else {
            rename(claimed, kept)
            throw StoreError.uploadOffset(hash, offset: offset, kept: size)
        }
        let upload = try FileBlobUpload(
            hash: hash, type: type, maximumBytes: maximumBytes, directory: directory, holder: holder, claimed: claimed, record: record)
        do {
            try await upload.hashKept(size)
        } catch {
            await upload.cancel()
            throw error
        }
        return upload
    }

    /// Keeps the file for the holder (after syncing it, so that what is kept is what was
    /// written); without a holder, or with nothing written, cancels.
    func suspend() async {
        guard let holder, descriptor >= 0, !failed, written > 0 else { return await cancel() }
        let (file, partial, directory, kept) = (descriptor, self.partial, self.directory, Self.keptPath(hash, holder: holder, in: directory))
        descriptor = -1
        failed = true
        _ = try? await BlockingIO.run {
            defer { close(file) }
            guard fsync(file) == 0, rename(partial, kept) == 0 else {
                unlink(partial)
                return
            }
            // Without it, a crash could lose the kept file's name, and the upload start again at 0.
            try? Self.sync(directory: directory + "/partial")
            Self.removeStaleKept(in: directory + "/partial")
        }
    }

    /// Feeds the first `count` bytes of the claimed file to the digest, 1 MiB at a time.
    private func hashKept(_ count: Int64) async throws {
        let reading = try FileBlobReading(blob: StoredBlob(hash: hash, size: count, type: ""), path: partial, range: 0..<count)
        defer { reading.close() }
        while let piece = try await reading.next(maximumBytes: 1 << 20) { await digest.update(piece) }
        written = count
    }

    /// Removes kept uploads untouched for `keptFor`.
    private static func removeStaleKept(in folder: String) {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: folder) else { return }
        let cutoff = Date().addingTimeInterval(-keptFor)
        for name in names where name.hasPrefix("kept-") {
            let path = folder + "/" + name
            if let touched = (try? FileManager.default.attributesOfItem(atPath: path))?[.modificationDate] as? Date, touched < cutoff { unlink(path) }
        }
    }
}

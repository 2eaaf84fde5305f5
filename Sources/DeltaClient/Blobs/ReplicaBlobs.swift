import DeltaCore
import Foundation

/// The replica's blobs on disk, beside its store: `<store>-blobs/<sha256>`, each file whole and
/// checked against its name before it gets that name. Writes go to `partial/` first (synced,
/// then renamed), so a crash never leaves a partial file under a blob's name; `uploaded/<sha256>`
/// marks a blob the server has confirmed holding, so it is never uploaded twice, and
/// `refused/<sha256>` one it refused for good (its answer), so it is not sent again until attached again.
struct ReplicaBlobs: Sendable {
    /// The directory.
    let directory: URL

    /// The blobs of the replica whose store is `storeURL`.
    init(storeURL: URL) {
        directory = URL(fileURLWithPath: storeURL.path + "-blobs")
    }

    /// Where the blob `hash` is, whole.
    func file(_ hash: BlobHash) -> URL { directory.appendingPathComponent(hash.hex) }

    /// Whether the blob `hash` is here, whole.
    func holds(_ hash: BlobHash) -> Bool { FileManager.default.fileExists(atPath: file(hash).path) }

    /// Whether the server confirmed holding `hash`.
    func isUploaded(_ hash: BlobHash) -> Bool {
        FileManager.default.fileExists(atPath: directory.appendingPathComponent("uploaded/\(hash.hex)").path)
    }

    /// Records that the server holds `hash`.
    func markUploaded(_ hash: BlobHash) throws {
        try make("uploaded")
        ReplicaBlobs.createEmpty(directory.appendingPathComponent("uploaded/\(hash.hex)").path)
    }

    /// Whether `hash` was downloaded: the server holds it, so the cache may let it go.
    func isDownloaded(_ hash: BlobHash) -> Bool {
        FileManager.default.fileExists(atPath: directory.appendingPathComponent("downloaded/\(hash.hex)").path)
    }

    /// Records that `hash` was downloaded.
    func markDownloaded(_ hash: BlobHash) throws {
        try make("downloaded")
        ReplicaBlobs.createEmpty(directory.appendingPathComponent("downloaded/\(hash.hex)").path)
    }

    /// Whether the server gave `hash` only to the replica's credential (`Cache-Control: private`:
    /// no public collection's visible record referenced it): a sign-out removes it whatever rows remain.
    func isPrivate(_ hash: BlobHash) -> Bool {
        FileManager.default.fileExists(atPath: directory.appendingPathComponent("private/\(hash.hex)").path)
    }

    /// Records that the server gave `hash` only to the replica's credential; noted before the blob
    /// gets its name, so that a kill never leaves it unmarked.
    func markPrivate(_ hash: BlobHash) throws {
        try make("private")
        ReplicaBlobs.createEmpty(directory.appendingPathComponent("private/\(hash.hex)").path)
    }

    /// Whether an upload of `hash` was started before (it may have reached the server).
    func wasAttempted(_ hash: BlobHash) -> Bool {
        FileManager.default.fileExists(atPath: directory.appendingPathComponent("uploading/\(hash.hex)").path)
    }

    /// Records that an upload of `hash` starts.
    func markAttempted(_ hash: BlobHash) throws {
        try make("uploading")
        ReplicaBlobs.createEmpty(directory.appendingPathComponent("uploading/\(hash.hex)").path)
    }

    /// The server's refusal of `hash` for good (`HTTP 413: …`: too large, not its hash), nil
    /// unless it refused it: the blob is not sent again until its bytes are attached again.
    func refusal(_ hash: BlobHash) -> String? {
        try? String(contentsOf: directory.appendingPathComponent("refused/\(hash.hex)"), encoding: .utf8)
    }

    /// Records that the server refused `hash` for good, and its answer.
    func markRefused(_ hash: BlobHash, _ refusal: String) throws {
        try make("refused")
        let url = directory.appendingPathComponent("refused/\(hash.hex)")
        do { try Data(refusal.utf8).write(to: url) } catch {
            throw ReplicaError(.store, "cannot note a blob the server refused", evidence: "\(url.path): \(error)")
        }
    }

    /// Copies the bytes `read` hands over (nil at the end) into the replica, hashing them as
    /// they go, and returns their reference: one piece at a time, whatever the size.
    func store(type: String, _ read: () throws -> Data?) throws -> BlobReference {
        guard BlobReference.isMediaType(type) else {
            throw ReplicaError(.configuration, "a blob's type must be a media type such as image/jpeg", evidence: String(reflecting: type))
        }
        try make("partial")
        let partial = directory.appendingPathComponent("partial/\(UUID().uuidString.lowercased())")
        guard ReplicaBlobs.createEmpty(partial.path), let handle = try? FileHandle(forWritingTo: partial) else {
            throw ReplicaError(.store, "cannot create a blob file", evidence: partial.path)
        }
        var digest = SHA256()
        var size: Int64 = 0
        do {
            defer { try? handle.close() }
            while let piece = try read(), !piece.isEmpty {
                digest.update(piece)
                try handle.write(contentsOf: piece)
                size += Int64(piece.count)
            }
            try handle.synchronize()
        } catch {
            try? FileManager.default.removeItem(at: partial)
            throw error as? ReplicaError ?? ReplicaError(.store, "cannot write a blob file", evidence: "\(error)")
        }
        let hash = BlobHash(digest: digest.finalize())
        try adopt(partial, as: hash)
        // Attached again: the next push that references it tries the server once more.
        try? FileManager.default.removeItem(at: directory.appendingPathComponent("refused/\(hash.hex)"))
        return BlobReference(hash: hash, size: size, type: type)
    }

    /// Gives the checked file `partial` the name `hash` (replacing nothing: the same name is the same bytes).
    /// With `epoch` (a download's, from its start), only while no sign-out happened since: a
    /// blob the signed-out user's credential fetched never lands after their blobs were removed
    /// (`CancellationError`). Checked before the rename and again after it, since a sign-out in
    /// another process may remove blobs between the two.
    func adopt(_ partial: URL, as hash: BlobHash, epoch: String? = nil) throws {
        if let epoch, self.epoch() != epoch {
            try? FileManager.default.removeItem(at: partial)
            throw CancellationError()
        }
        if rename(partial.path, file(hash).path) != 0 {
            try? FileManager.default.removeItem(at: partial)
            guard holds(hash) else { throw ReplicaError(.store, "cannot name a blob file", evidence: "\(hash): errno \(errno)") }
        }
        if let epoch, self.epoch() != epoch {
            if !isBundled(hash) { remove(hash) }
            throw CancellationError()
        }
    }

    /// The mark of the last sign-out (empty before the first): `removeAll` writes a new one
    /// before it removes anything.
    func epoch() -> String {
        (try? String(contentsOf: directory.appendingPathComponent("epoch"), encoding: .utf8)) ?? ""
    }

    /// The SHA-256 and length of the file at `url`, read in pieces.
    static func digest(of url: URL) throws -> (hash: BlobHash, size: Int64) {
        guard let handle = try? FileHandle(forReadingFrom: url) else { throw ReplicaError(.store, "cannot read a blob file", evidence: url.path) }
        defer { try? handle.close() }
        var digest = SHA256()
        var size: Int64 = 0
        while let piece = try handle.read(upToCount: 1 << 20), !piece.isEmpty {
            digest.update(piece)
            size += Int64(piece.count)
        }
        return (BlobHash(digest: digest.finalize()), size)
    }

    /// Removes every blob but `kept` and those that came with the bundled snapshot, and every
    /// partial file (a sign-out's step: it runs again after a kill until it succeeds). A blob the
    /// server gave only to the signed-out credential (`isPrivate`) goes even when in `kept`: a row
    /// that still references it is public now, and the next user downloads it again if so.
    func removeAll(keeping kept: Set<BlobHash>) throws {
        do {
            // First: a download that began before this sign-out will see it and not keep its blob,
            // one that has not made the directory yet too (its epoch was read as none).
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            try Data(UUID().uuidString.utf8).write(to: directory.appendingPathComponent("epoch"), options: .atomic)
            for name in try FileManager.default.contentsOfDirectory(atPath: directory.path) {
                guard let hash = try? BlobHash(name), !kept.contains(hash) || isPrivate(hash), !isBundled(hash) else { continue }
                remove(hash)
                if holds(hash) { throw ReplicaError(.store, "cannot remove a blob file", evidence: file(hash).path) }
            }
            // What the server confirmed holding (or refused) for the signed-out user's credential is not the next user's.
            for place in ["partial", "uploaded", "uploading", "private", "refused"] {
                let url = directory.appendingPathComponent(place)
                if FileManager.default.fileExists(atPath: url.path) { try FileManager.default.removeItem(at: url) }
            }
        } catch {
            throw error as? ReplicaError ?? ReplicaError(.store, "cannot remove the signed-out user's blobs", evidence: "\(directory.path): \(error)")
        }
    }

    /// Removes what kills left in `partial/`: a half-written attach, copy or piece an hour old,
    /// and a resumable download nobody asked to finish for a week. Younger files may belong to a
    /// write in progress (another process on the same store), so they stay.
    func removeStalePartials(now: Date = Date()) {
        let partial = directory.appendingPathComponent("partial")
        let keys: [URLResourceKey] = [.contentModificationDateKey]
        for entry in (try? FileManager.default.contentsOfDirectory(at: partial, includingPropertiesForKeys: keys)) ?? [] {
            let modified = (try? entry.resourceValues(forKeys: Set(keys)))?.contentModificationDate ?? .distantPast
            let age = now.timeIntervalSince(modified)
            if age > (entry.pathExtension == "download" ? 7 * 86_400 : 3_600) { try? FileManager.default.removeItem(at: entry) }
        }
    }

    /// Creates an empty file at `path` when missing, in place: `FileManager.createFile` writes
    /// through a hidden `.dat.nosync…` file of its own, which a kill leaves behind.
    @discardableResult
    static func createEmpty(_ path: String) -> Bool {
        let descriptor = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else { return false }
        close(descriptor)
        return true
    }

    /// Creates `directory/name` when missing.
    func make(_ name: String) throws {
        do {
            try FileManager.default.createDirectory(at: directory.appendingPathComponent(name), withIntermediateDirectories: true)
        } catch {
            throw ReplicaError(.store, "cannot create the blob directory", evidence: "\(directory.path): \(error)")
        }
    }
}

import DeltaCore
import Foundation

/// Copies into the replica the blobs of a format-2 snapshot being installed that the records
/// kept from it reference (docs/SNAPSHOT-FORMAT.md, *Blobs*). Each is written aside as its lines
/// arrive and gets its name only once the reader has checked its hash (`blobEnd`); it is then
/// marked bundled: it came with the app, so the cache budget never evicts it and a sign-out
/// keeps it. A blob the replica already holds is only marked.
struct BundledBlobs {
    /// The replica's blobs.
    let blobs: ReplicaBlobs
    /// The blobs the kept records reference.
    private var wanted: Set<BlobHash> = []
    /// The blob being copied.
    private var writing: (hash: BlobHash, partial: URL, handle: FileHandle)?
    /// The blobs copied by this install: removed again should the snapshot be refused after all.
    private var copied: [BlobHash] = []

    /// Copies into `blobs`.
    init(into blobs: ReplicaBlobs) { self.blobs = blobs }

    /// Notes the blobs a kept record references.
    mutating func keep(_ record: Record) {
        guard record.body.containsBlobMarker, let references = try? record.blobReferences() else { return }
        for reference in references { wanted.insert(reference.hash) }
    }

    /// Takes a blob item of the snapshot.
    mutating func take(_ item: SnapshotItem) throws {
        switch item {
        case .blob(let reference) where wanted.contains(reference.hash):
            guard !blobs.holds(reference.hash) else { return try blobs.markBundled(reference.hash) }
            try blobs.make("partial")
            let partial = blobs.directory.appendingPathComponent("partial/\(UUID().uuidString.lowercased())")
            guard ReplicaBlobs.createEmpty(partial.path), let handle = try? FileHandle(forWritingTo: partial) else {
                throw ReplicaError(.store, "cannot create a blob file", evidence: partial.path)
            }
            writing = (reference.hash, partial, handle)
        case .blobBytes(let bytes):
            guard let writing else { return }
            do { try writing.handle.write(contentsOf: bytes) } catch {
                throw ReplicaError(.store, "cannot write a bundled blob", evidence: "\(writing.partial.path): \(error)")
            }
        case .blobEnd(let reference):
            guard let current = writing, current.hash == reference.hash else { return }
            writing = nil
            do {
                try current.handle.synchronize()
                try current.handle.close()
            } catch {
                try? FileManager.default.removeItem(at: current.partial)
                throw ReplicaError(.store, "cannot write a bundled blob", evidence: "\(current.partial.path): \(error)")
            }
            try blobs.adopt(current.partial, as: current.hash)
            copied.append(current.hash)
            try blobs.markBundled(current.hash)
        case .blob, .manifest, .record: return
        }
    }

    /// The snapshot was read to its verified end: the blobs copied stay.
    mutating func commit() { copied.removeAll() }

    /// Drops the blob being copied and those copied (the snapshot was refused, or the install
    /// stopped); nothing after `commit`.
    mutating func abandon() {
        if let writing {
            try? writing.handle.close()
            try? FileManager.default.removeItem(at: writing.partial)
            self.writing = nil
        }
        for hash in copied { blobs.remove(hash) }
        copied.removeAll()
    }
}

extension ReplicaBlobs {
    /// Removes the blob `hash` and what is noted about it.
    func remove(_ hash: BlobHash) {
        for place in ["bundled/", "uploaded/", "uploading/", "downloaded/", "private/", ""] {
            try? FileManager.default.removeItem(at: directory.appendingPathComponent(place + hash.hex))
        }
    }

    /// Whether `hash` came with the bundled snapshot.
    func isBundled(_ hash: BlobHash) -> Bool {
        FileManager.default.fileExists(atPath: directory.appendingPathComponent("bundled/\(hash.hex)").path)
    }

    /// Records that `hash` came with the bundled snapshot.
    func markBundled(_ hash: BlobHash) throws {
        try make("bundled")
        ReplicaBlobs.createEmpty(directory.appendingPathComponent("bundled/\(hash.hex)").path)
    }
}

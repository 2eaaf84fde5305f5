import DeltaCore
import DeltaSQLite
import Foundation

/// When a replica downloads the blobs a collection's records reference.
public enum BlobDownloads: Sendable, Equatable {
    /// On first access, by `Replica.blob(_:)`: the default.
    case lazy
    /// With the sync that brings the references, so that they are there offline afterwards.
    case eager
}

extension Replica {
    /// After a sync: downloads the blobs that the records of `.eager` collections reference and
    /// the replica lacks, for each collection marked as having new records (`markEagerBlobs`, in
    /// the transaction that brought them, so a kill cannot lose the mark). The mark goes once
    /// every blob is there; a failure keeps it for the next sync and leaves the blob to
    /// `blob(_:)` meanwhile: it never fails the sync.
    func downloadEagerBlobs() async {
        let blobs = self.blobs
        guard let pending = try? await store.run({ database, _ in try database.eagerBlobsPending() }) else { return }
        for collection in pending {
            guard configuration.blobDownloads[collection] == .eager else {
                _ = try? await store.run { database, _ in try database.setSyncText("eager-blobs:\(collection)", nil) }
                continue
            }
            let wanted = Locked<[BlobReference]>([])
            do {
                try await forEachRecord(in: collection) { record in
                    guard record.body.containsBlobMarker else { return }
                    let missing = ((try? record.blobReferences()) ?? []).filter { !blobs.holds($0.hash) }
                    if !missing.isEmpty { wanted.withLock { $0 += missing } }
                }
                var seen = Set<BlobHash>()
                var retry = false
                for reference in wanted.withLock({ $0 }) where seen.insert(reference.hash).inserted {
                    try Task.checkCancellation()
                    do { _ = try await blob(reference) } catch let error as ReplicaError where error.kind == .refused || error.kind == .unusableAnswer {
                        continue  // not this replica's to have, or not what the record says: asking again would not help
                    } catch is CancellationError {
                        return
                    } catch {
                        retry = true  // the network or the server: the next sync tries again
                    }
                }
                if !retry { try await store.run { database, _ in try database.setSyncText("eager-blobs:\(collection)", nil) } }
            } catch {
                if Task.isCancelled { return }
            }
        }
    }
}

extension ReplicaDatabase {
    /// Marks `collection` as having records whose blobs an `.eager` download must check.
    func markEagerBlobs(_ collection: String) throws {
        if eagerBlobCollections.contains(collection) { try setSyncText("eager-blobs:\(collection)", "1") }
    }

    /// The collections marked by `markEagerBlobs` and not yet downloaded.
    func eagerBlobsPending() throws -> [String] { try syncKeys(prefix: "eager-blobs:") }
}

extension ReplicaBlobs {
    /// Removes the least recently used blobs the server holds until those kept take at most
    /// `budget` bytes: never one still to be uploaded, which exists nowhere else, nor `kept`
    /// (the one just asked for), nor one that came with the bundled snapshot (it is the app's
    /// own, there offline, and does not count against the budget).
    func evict(toFit budget: Int64, keeping kept: BlobHash) {
        let keys: [URLResourceKey] = [.fileSizeKey, .contentModificationDateKey, .isRegularFileKey]
        guard let entries = try? FileManager.default.contentsOfDirectory(at: directory, includingPropertiesForKeys: keys) else { return }
        var total: Int64 = 0
        var evictable: [(url: URL, size: Int64, used: Date)] = []
        for entry in entries {
            guard let values = try? entry.resourceValues(forKeys: Set(keys)), values.isRegularFile == true else { continue }
            let size = Int64(values.fileSize ?? 0)
            guard let hash = try? BlobHash(entry.lastPathComponent), !isBundled(hash) else { continue }
            total += size
            if hash != kept, isUploaded(hash) || isDownloaded(hash) {
                evictable.append((entry, size, values.contentModificationDate ?? .distantPast))
            }
        }
        for blob in evictable.sorted(by: { $0.used < $1.used }) where total > budget {
            try? FileManager.default.removeItem(at: blob.url)
            total -= blob.size
        }
    }

    /// Marks `hash` as just used (its file's modification time), for `evict(toFit:)`.
    func touch(_ hash: BlobHash) {
        try? FileManager.default.setAttributes([.modificationDate: Date()], ofItemAtPath: file(hash).path)
    }
}

import DeltaCore
import Foundation

extension ReplicaFiles {
    /// Copies the file at `url` into the replica's blobs, 1 MiB at a time, and returns the
    /// reference to put in a record (see `Replica.attach(contentsOf:type:)`); the next sync
    /// uploads it before the write that references it.
    public func attach(contentsOf url: URL, type: String) throws -> BlobReference {
        guard let handle = try? FileHandle(forReadingFrom: url) else {
            throw ReplicaError(.configuration, "cannot read the file to attach", evidence: url.path)
        }
        defer { try? handle.close() }
        return try ReplicaBlobs(storeURL: storeURL).store(type: type) { try handle.read(upToCount: 1 << 20) }
    }

    /// The replica's own copy of the blob `hash`, when it holds one.
    public func localBlob(_ hash: BlobHash) -> URL? {
        let blobs = ReplicaBlobs(storeURL: storeURL)
        return blobs.holds(hash) ? blobs.file(hash) : nil
    }
}

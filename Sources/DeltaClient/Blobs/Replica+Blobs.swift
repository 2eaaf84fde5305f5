import DeltaCore
import Foundation

extension Replica {
    /// Copies `data` into the replica as a blob and returns the reference to put in a record
    /// (`{"$blob": …, "size": …, "type": …}`). It is uploaded by the `sync()` that pushes the
    /// first write referencing it, before that write; until then it is kept, whatever the cache.
    public func attach(_ data: Data, type: String) async throws -> BlobReference {
        let blobs = self.blobs
        return try await background {
            var given = false
            return try blobs.store(type: type) {
                defer { given = true }
                return given ? nil : data
            }
        }
    }

    /// Copies the file at `url` into the replica as a blob, 1 MiB at a time whatever its size,
    /// and returns the reference to put in a record.
    public func attach(contentsOf url: URL, type: String) async throws -> BlobReference {
        let blobs = self.blobs
        return try await background {
            guard let handle = try? FileHandle(forReadingFrom: url) else {
                throw ReplicaError(.configuration, "cannot read the file to attach", evidence: url.path)
            }
            defer { try? handle.close() }
            return try blobs.store(type: type) { try handle.read(upToCount: 1 << 20) }
        }
    }

    /// Uploads the blobs `batch`'s records reference that this replica holds and the server has
    /// not confirmed, before the batch leaves: the server refuses a reference to a blob it does
    /// not hold. Each is uploaded once; one the replica does not hold is left to the server to judge.
    /// Returns the server's refusals of those it refused for good, now or before (not sent
    /// again until attached again): the batch leaves anyway, and the server turns down the
    /// writes that reference them (`invalid: blob-missing`).
    func uploadBlobs(of batch: [Mutation]) async throws -> [String] {
        let blobs = self.blobs
        var pending: [BlobReference] = []
        var refusals: [String] = []
        for mutation in batch {
            guard let record = mutation.record, record.body.containsBlobMarker else { continue }
            for reference in (try? record.blobReferences()) ?? []
            where blobs.holds(reference.hash) && !blobs.isUploaded(reference.hash) && !pending.contains(reference) {
                pending.append(reference)
            }
        }
        for reference in pending {
            try Task.checkCancellation()
            var refusal = blobs.refusal(reference.hash)
            if refusal == nil { refusal = try await uploadBlob(reference) }
            if let refusal, !refusals.contains(refusal) { refusals.append(refusal) }
        }
        return refusals
    }
}

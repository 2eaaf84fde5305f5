import DeltaCore

/// The blob `SnapshotWriter` is writing: its header, and its bytes so far.
struct BlobInProgress {
    let reference: BlobReference
    var hasher = SHA256()
    var size: Int64 = 0
    var pending: [UInt8] = []
}

extension SnapshotWriter {
    /// Format 2: the blobs the records written so far reference, sorted by hash: once every
    /// record is in, the blobs to write (`beginBlob`, `writeBlobBytes`, `endBlob`), in this order.
    public var referencedBlobs: [BlobReference] { referenced.values.sorted { $0.hash < $1.hash } }

    /// Format 2, after every record: starts the blob `blob` names (its stored size and type).
    /// Blobs go in hash order, each one a record references, once.
    public func beginBlob(_ blob: BlobReference) throws {
        guard manifest.hasBlobs else { throw WireError(.snapshot, "the manifest has no blob section", evidence: "format \(manifest.version)") }
        guard collectionIndex == manifest.collections.count else {
            throw WireError(.snapshot, "blobs come after every record", evidence: "\(manifest.collections[collectionIndex].name) is not complete")
        }
        if let currentBlob { throw WireError(.snapshot, "a blob is not complete", evidence: currentBlob.reference.hash.hex) }
        guard referenced[blob.hash] != nil else { throw WireError(.snapshot, "no record references the blob", evidence: blob.hash.hex) }
        if let lastBlob, lastBlob >= blob.hash {
            throw WireError(.snapshot, "blobs go in hash order, each once", evidence: "\(blob.hash.hex.prefix(16))… after \(lastBlob.hex.prefix(16))…")
        }
        try line(blob.json.canonicalBytes)
        currentBlob = BlobInProgress(reference: blob)
        currentBlob?.pending.reserveCapacity(SnapshotBlobLines.bytesPerLine)
    }

    /// Writes the next bytes of the blob begun.
    public func writeBlobBytes(_ bytes: some Collection<UInt8>) throws {
        guard var blob = currentBlob else { throw WireError(.snapshot, "no blob is begun") }
        currentBlob = nil
        blob.hasher.update(Array(bytes))
        blob.size += Int64(bytes.count)
        var rest = bytes[...]
        while !rest.isEmpty {
            let take = rest.prefix(SnapshotBlobLines.bytesPerLine - blob.pending.count)
            blob.pending.append(contentsOf: take)
            rest = rest.dropFirst(take.count)
            if blob.pending.count == SnapshotBlobLines.bytesPerLine {
                try line(SnapshotBlobLines.line(blob.pending))
                blob.pending.removeAll(keepingCapacity: true)
            }
        }
        currentBlob = blob
    }

    /// Ends the blob begun: refuses bytes that do not hash to its name or add up to its size,
    /// so that no snapshot is written with a blob its readers would refuse.
    public func endBlob() throws {
        guard let blob = currentBlob else { throw WireError(.snapshot, "no blob is begun") }
        if !blob.pending.isEmpty { try line(SnapshotBlobLines.line(blob.pending)) }
        let hash = BlobHash(digest: blob.hasher.finalize())
        guard hash == blob.reference.hash, blob.size == blob.reference.size else {
            throw WireError(
                .snapshot, "the bytes given for blob \(blob.reference.hash.hex) are not its bytes",
                evidence: "\(blob.size) bytes hashing to \(hash.hex), not \(blob.reference.size)")
        }
        currentBlob = nil
        lastBlob = hash
        blobsWritten += 1
        blobBytes += blob.size
    }

    /// `beginBlob`, the bytes `read` hands over (nil at the end), and `endBlob`.
    public func appendBlob(_ blob: BlobReference, bytes read: () throws -> [UInt8]?) throws {
        try beginBlob(blob)
        while let bytes = try read(), !bytes.isEmpty { try writeBlobBytes(bytes) }
        try endBlob()
    }

    /// Notes the blobs a record references (format 2).
    func noteReferences(_ body: some Collection<UInt8>) throws {
        let bytes = Array(body)
        guard bytes.containsBlobMarker else { return }
        for reference in try Record(id: "", hidden: false, canonicalBody: bytes).blobReferences() where referenced[reference.hash] == nil {
            referenced[reference.hash] = reference
        }
    }
}

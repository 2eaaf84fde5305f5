/// Where a format-2 snapshot's blob section stands, for `SnapshotReader`.
struct BlobSection {
    /// How a header line starts: the canonical form of a blob reference.
    static let headerStart = Array(#"{"$blob":"#.utf8)

    /// The blobs the records reference: exactly the ones the section must hold.
    var referenced: Set<BlobHash> = []
    /// The blobs read whole so far.
    var seen: Set<BlobHash> = []
    /// Their bytes.
    var bytes: Int64 = 0
    /// The last blob's name, for the order.
    var last: BlobHash?
    /// The blob being read: its header, the bytes still to come, their hash so far.
    var current: (reference: BlobReference, remaining: Int64, hasher: SHA256)?
    /// A blob read whole and checked, still to be reported as `blobEnd`.
    var ended: BlobReference?
}

extension SnapshotReader {
    /// Format 2: how many blobs have been read whole and checked so far.
    public var blobCount: Int { blobSection.seen.count }
    /// Format 2: their bytes.
    public var blobBytes: Int64 { blobSection.bytes }

    /// Notes the blobs a record references, which the blob section must then hold.
    func noteReferences(_ record: Record) throws {
        guard record.body.containsBlobMarker else { return }
        do {
            for reference in try record.blobReferences() { blobSection.referenced.insert(reference.hash) }
        } catch {
            throw WireError(.snapshot, "line \(lines.lineNumber) has a malformed blob reference", evidence: "\(record.id): \(error)")
        }
    }

    /// A blob's header line: its canonical reference, after the previous blob's name, and one a
    /// record references.
    func blobHeader(_ line: UnsafeBufferPointer<UInt8>) throws -> SnapshotItem {
        let number = lines.lineNumber
        let reference: BlobReference
        do { reference = try BlobReference(try JSONValue(parsing: line)) } catch {
            throw WireError(.snapshot, "line \(number) is not a blob header", evidence: "\(error)")
        }
        guard reference.json.canonicalBytes.elementsEqual(line) else {
            throw WireError(.snapshot, "line \(number) is not in canonical form", evidence: reference.hash.hex)
        }
        if let last = blobSection.last, last >= reference.hash {
            throw WireError(
                .snapshot, "line \(number) breaks the order of the blobs", evidence: "\(reference.hash.hex.prefix(16))… after \(last.hex.prefix(16))…")
        }
        guard blobSection.referenced.contains(reference.hash) else {
            throw WireError(.snapshot, "line \(number) holds a blob no record references", evidence: reference.hash.hex)
        }
        blobSection.last = reference.hash
        blobSection.current = (reference, reference.size, SHA256())
        if reference.size == 0 { try endBlob() }
        return .blob(reference)
    }

    /// The next line of the blob being read.
    func blobBytes(_ line: UnsafeBufferPointer<UInt8>) throws -> SnapshotItem {
        guard var current = blobSection.current else { preconditionFailure("no blob is being read") }
        let expected = Int(min(current.remaining, Int64(SnapshotBlobLines.bytesPerLine)))
        let bytes: [UInt8]
        do { bytes = try SnapshotBlobLines.bytes(of: line, expected: expected) } catch let error as WireError {
            throw WireError(.snapshot, "line \(lines.lineNumber) of blob \(current.reference.hash.hex.prefix(16))… is damaged", evidence: error.description)
        }
        current.hasher.update(bytes)
        current.remaining -= Int64(bytes.count)
        blobSection.current = current
        if current.remaining == 0 { try endBlob() }
        return .blobBytes(bytes)
    }

    /// Checks the blob just read against its name.
    private func endBlob() throws {
        guard let current = blobSection.current else { return }
        let hash = BlobHash(digest: current.hasher.finalize())
        guard hash == current.reference.hash else {
            throw WireError(.snapshot, "blob \(current.reference.hash.hex) does not match its hash", evidence: "its bytes hash to \(hash.hex)")
        }
        blobSection.current = nil
        blobSection.seen.insert(hash)
        blobSection.bytes += current.reference.size
        blobSection.ended = current.reference
    }

    /// Checks the trailer's blob count, and that every blob a record references was there.
    func verifyBlobCount(_ value: JSONValue?) throws {
        guard case .number(let text) = value, let count = Int(text) else {
            throw WireError(.snapshot, "the trailer of a format 2 snapshot lacks its blob count", evidence: "line \(lines.lineNumber)")
        }
        guard count == blobSection.seen.count else {
            throw WireError(.snapshot, "the trailer's blob count differs from the blobs read", evidence: "\(count) vs \(blobSection.seen.count)")
        }
        if let missing = blobSection.referenced.subtracting(blobSection.seen).min() {
            throw WireError(.snapshot, "a record references a blob the snapshot does not hold", evidence: missing.hex)
        }
    }
}

import Foundation

/// One item read from a snapshot.
public enum SnapshotItem: Sendable, Equatable {
    /// The manifest: always the first item.
    case manifest(SnapshotManifest)
    /// A visible record of `collection`.
    case record(CollectionName, Record)
    /// Format 2: a blob starts; its bytes follow as `blobBytes`, then `blobEnd`. Blobs come after
    /// every record, sorted by hash, each one the records reference, once.
    case blob(BlobReference)
    /// The next bytes of the blob that started, in order (at most 49,152 at a time).
    case blobBytes([UInt8])
    /// The blob's bytes are all there and hash to its name: only now may a reader keep them.
    case blobEnd(BlobReference)
}

/// Reads and verifies a snapshot as it streams: gzip integrity, manifest, record order and
/// canonical form, counts, each collection's state digest (when the manifest gives one), each
/// blob against its hash (format 2), and the SHA-256 in the trailer. Memory stays bounded by one
/// compressed chunk and one record (plus the names of the blobs the records reference).
///
/// `next()` returns nil only after the whole file has been verified; any problem throws a
/// `WireError` of kind `.snapshot` or `.compression` that says what is wrong.
public final class SnapshotReader {
    let lines: InflatingLines
    var manifest: SnapshotManifest?
    /// Format 2: where the blob section stands.
    var blobSection = BlobSection()
    private var collectionIndex = 0
    private var readInCollection = 0
    private var lastID: [UInt8] = []
    private var done = false
    private var digest = StateDigest.empty
    /// The state digest of each collection read to its end so far (checked against the manifest's, when it gives one).
    public private(set) var digests: [CollectionName: StateDigest] = [:]
    /// Decompressed bytes read so far.
    public var contentBytes: Int { lines.contentBytes }
    /// The SHA-256 of the content (hex), once the file has been read to its verified end.
    public private(set) var contentDigest: String?

    /// Reads compressed bytes from `source`, which returns nil at the end of the file.
    public init(source: @escaping () throws -> [UInt8]?) throws {
        lines = try InflatingLines(source: source)
    }

    /// Reads the file open in `handle`, 1 MiB at a time, closing it at its end.
    public convenience init(reading handle: FileHandle) throws {
        try self.init {
            let chunk = try handle.read(upToCount: 1 << 20) ?? Data()
            if chunk.isEmpty { try? handle.close() }
            return chunk.isEmpty ? nil : Array(chunk)
        }
    }

    /// The next item, or nil once the snapshot has been read to its verified end.
    public func next() throws -> SnapshotItem? {
        if done { return nil }
        guard let manifest else {
            guard let line = try lines.next() else { throw WireError(.snapshot, "the file is empty") }
            let parsed = try SnapshotManifest(parsing: Array(line))
            manifest = parsed
            try skipEmptyCollections(parsed)
            return .manifest(parsed)
        }
        if let ended = blobSection.ended {
            blobSection.ended = nil
            return .blobEnd(ended)
        }
        guard let line = try lines.next() else {
            throw WireError(.snapshot, "the file is truncated", evidence: "it ends after line \(lines.lineNumber), before the trailer")
        }
        if blobSection.current != nil { return try blobBytes(line) }
        if collectionIndex == manifest.collections.count {
            if manifest.hasBlobs && line.starts(with: BlobSection.headerStart) { return try blobHeader(line) }
            try verifyTrailer(Array(line), manifest)
            done = true
            return nil
        }
        let collection = manifest.collections[collectionIndex].name
        let record = try self.record(line)
        if manifest.hasBlobs { try noteReferences(record) }
        digest.add(body: line)
        readInCollection += 1
        try skipEmptyCollections(manifest)
        return .record(collection, record)
    }

    /// Checks a record line: canonical, visible, after the previous id. Most lines are recognised
    /// by `CanonicalScanner` without a JSON tree; the rest go through the full parser, which
    /// either accepts them too or says what is wrong.
    private func record(_ line: UnsafeBufferPointer<UInt8>) throws -> Record {
        let lineNumber = lines.lineNumber
        let record: Record
        let id: UnsafeBufferPointer<UInt8>
        if let range = CanonicalScanner.record(line) {
            id = UnsafeBufferPointer(rebasing: line[range])
            record = Record(id: String(decoding: id, as: UTF8.self), hidden: false, canonicalBody: Array(line))
        } else {
            do { record = try Record(parsing: line) } catch { throw WireError(.snapshot, "line \(lineNumber) is not a record", evidence: "\(error)") }
            guard !record.hidden else {
                throw WireError(.snapshot, "line \(lineNumber) is a hidden record; snapshots hold visible records only", evidence: record.id)
            }
            guard record.body.elementsEqual(line) else { throw WireError(.snapshot, "line \(lineNumber) is not in canonical form", evidence: record.id) }
            try Array(record.id.utf8).withUnsafeBufferPointer { try checkOrder($0, lineNumber) }
            return record
        }
        try checkOrder(id, lineNumber)
        return record
    }

    private func checkOrder(_ id: UnsafeBufferPointer<UInt8>, _ lineNumber: Int) throws {
        if !lastID.isEmpty, !lastID.lexicographicallyPrecedes(id) {
            let collection = manifest!.collections[collectionIndex].name
            throw WireError(
                .snapshot, "line \(lineNumber) breaks the id order of \(collection)",
                evidence: "\(String(reflecting: String(decoding: id, as: UTF8.self))) after \(String(reflecting: String(decoding: lastID, as: UTF8.self)))")
        }
        lastID.removeAll(keepingCapacity: true)
        lastID.append(contentsOf: id)
    }

    /// Moves past every collection whose records have all been read, checking its digest.
    private func skipEmptyCollections(_ manifest: SnapshotManifest) throws {
        while collectionIndex < manifest.collections.count && readInCollection == manifest.collections[collectionIndex].records {
            let entry = manifest.collections[collectionIndex]
            if let expected = entry.digest, expected != digest {
                throw WireError(
                    .snapshot, "the records of \(entry.name) do not match the manifest's state digest",
                    evidence: "manifest \(expected.hex.prefix(16))…, records \(digest.hex.prefix(16))…")
            }
            digests[entry.name] = digest
            digest = .empty
            collectionIndex += 1
            readInCollection = 0
            lastID.removeAll(keepingCapacity: true)
        }
    }

    private func verifyTrailer(_ line: [UInt8], _ manifest: SnapshotManifest) throws {
        guard let trailer = try? JSONValue(parsing: line), case .number(let count) = trailer["records"], case .string(let digest) = trailer["sha256"] else {
            throw WireError(
                .snapshot, "line \(lines.lineNumber) should be the trailer", evidence: "more records than the manifest declares, or a damaged trailer")
        }
        guard Int(count) == manifest.totalRecords else {
            throw WireError(.snapshot, "the trailer's record count differs from the manifest", evidence: "\(count) vs \(manifest.totalRecords)")
        }
        if manifest.hasBlobs { try verifyBlobCount(trailer["blobs"]) }
        let computed = lines.digestBeforeLastLine()
        guard digest == computed else {
            throw WireError(.snapshot, "the content does not match its SHA-256", evidence: "trailer \(digest.prefix(16))…, content \(computed.prefix(16))…")
        }
        contentDigest = computed
        if try lines.hasMoreContent {
            throw WireError(.snapshot, "data after the trailer", evidence: "line \(lines.lineNumber + 1)")
        }
    }
}

import DeltaCore
import Foundation

/// Writes a snapshot file: one gzip member holding the manifest line, the records, with format 2
/// the blobs they reference (`appendBlob`), and a trailer line.
///
/// Output depends only on the input (fixed gzip header and level), so the same data always
/// bakes to the same bytes. Lines are gathered into 256 KiB pieces, hashed on the caller's
/// thread and deflated on a `StreamWorker`'s; compressed bytes go to `sink` on the caller's
/// thread as they are produced, so memory stays bounded however many records are written.
/// See docs/SNAPSHOT-FORMAT.md.
public final class SnapshotWriter {
    private static let pieceSize = 1 << 18
    let manifest: SnapshotManifest
    private let worker: StreamWorker
    private let sink: ([UInt8]) throws -> Void
    private var hasher = SHA256()
    private var piece: [UInt8] = []
    /// Format 2: the blobs the records reference, and the ones written so far.
    var referenced: [BlobHash: BlobReference] = [:]
    var blobsWritten = 0
    /// Format 2: the bytes of the blobs written so far.
    public internal(set) var blobBytes: Int64 = 0
    var lastBlob: BlobHash?
    var currentBlob: BlobInProgress?
    var collectionIndex = 0
    private var writtenInCollection = 0
    private var finished = false
    private var ended = false

    /// Starts a snapshot for `manifest`; compressed output goes to `sink` as zlib produces it.
    public init(manifest: SnapshotManifest, level: Int32 = GzipCompressor.defaultLevel, sink: @escaping ([UInt8]) throws -> Void) throws {
        self.manifest = manifest
        self.sink = sink
        worker = StreamWorker("deltasnap deflate") { try DeflateTransform(level: level) }
        piece.reserveCapacity(Self.pieceSize + 4096)
        try line(manifest.canonicalBytes)
        try skipEmptyCollections()
    }

    deinit { worker.cancel() }

    /// Appends the next record's canonical body: records come collection by collection, in manifest order, sorted by id.
    public func append(body: some Collection<UInt8>) throws {
        guard collectionIndex < manifest.collections.count else {
            throw WireError(.snapshot, "more records than the manifest declares", evidence: "\(manifest.totalRecords) declared")
        }
        try line(body)
        if manifest.hasBlobs { try noteReferences(body) }
        writtenInCollection += 1
        try skipEmptyCollections()
    }

    /// Ends the snapshot: writes the trailer (record count and SHA-256 of everything before it) and the gzip end.
    public func finish() throws {
        precondition(!finished, "SnapshotWriter.finish twice")
        guard collectionIndex == manifest.collections.count else {
            let collection = manifest.collections[collectionIndex]
            throw WireError(
                .snapshot, "fewer records than the manifest declares",
                evidence: "\(collection.name): \(writtenInCollection) of \(collection.records)")
        }
        if let currentBlob { throw WireError(.snapshot, "a blob is not complete", evidence: currentBlob.reference.hash.hex) }
        // Each blob written is a referenced one, once (`appendBlob` checks): equal counts mean all.
        if manifest.hasBlobs && blobsWritten != referenced.count {
            throw WireError(.snapshot, "fewer blobs than the records reference", evidence: "\(blobsWritten) of \(referenced.count)")
        }
        finished = true
        hasher.update(piece)
        let blobs = manifest.hasBlobs ? [JSONMember(key: "blobs", value: .number(String(blobsWritten)))] : []
        JSONValue.object(
            blobs + [
                JSONMember(key: "records", value: .number(String(manifest.totalRecords))),
                JSONMember(key: "sha256", value: .string(hasher.hexDigest())),
            ]
        ).write(into: &piece)
        piece.append(UInt8(ascii: "\n"))
        try hand(piece)
        worker.endInput()
        while !ended { try drain(wait: true) }
    }

    private func skipEmptyCollections() throws {
        while collectionIndex < manifest.collections.count && writtenInCollection == manifest.collections[collectionIndex].records {
            collectionIndex += 1
            writtenInCollection = 0
        }
    }

    func line(_ bytes: some Collection<UInt8>) throws {
        piece.append(contentsOf: bytes)
        piece.append(UInt8(ascii: "\n"))
        if piece.count >= Self.pieceSize {
            hasher.update(piece)
            try hand(piece)
            piece.removeAll(keepingCapacity: true)
        }
    }

    /// Hands a piece to the worker, writing out compressed output while it has no room.
    private func hand(_ bytes: [UInt8]) throws {
        while !worker.wantsInput { try drain(wait: true) }
        worker.push(bytes)
        try drain(wait: false)
    }

    /// Writes whatever compressed output is ready to the sink; with `wait`, first waits for some
    /// (or for room for more input).
    private func drain(wait: Bool) throws {
        var wait = wait
        while let output = worker.take(wait: wait) {
            wait = false
            switch output {
            case .bytes(let bytes): try sink(bytes)
            case .end: ended = true
            case .failure(let failure): throw failure
            }
        }
    }
}

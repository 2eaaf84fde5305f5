/// Writes a snapshot file: one gzip member holding the manifest line, the records, and a trailer line.
///
/// Output depends only on the input (fixed gzip header and level), so the same data always
/// bakes to the same bytes. Compressed bytes go to `sink` as they are produced: memory stays
/// bounded however many records are written. See docs/SNAPSHOT-FORMAT.md.
public final class SnapshotWriter {
    private let manifest: SnapshotManifest
    private let compressor: GzipCompressor
    private let sink: ([UInt8]) throws -> Void
    private var hasher = SHA256()
    private var output: [UInt8] = []
    private var collectionIndex = 0
    private var writtenInCollection = 0
    private var finished = false

    /// Starts a snapshot for `manifest`; compressed output goes to `sink` in pieces of about 64 KiB.
    public init(manifest: SnapshotManifest, level: Int32 = GzipCompressor.defaultLevel, sink: @escaping ([UInt8]) throws -> Void) throws {
        self.manifest = manifest
        self.compressor = try GzipCompressor(level: level)
        self.sink = sink
        try line(manifest.canonicalBytes)
        try skipEmptyCollections()
    }

    /// Appends the next record's canonical body: records come collection by collection, in manifest order, sorted by id.
    public func append(body: some Collection<UInt8>) throws {
        guard collectionIndex < manifest.collections.count else {
            throw WireError(.snapshot, "more records than the manifest declares", evidence: "\(manifest.totalRecords) declared")
        }
        try line(body)
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
        finished = true
        var trailer = JSONValue.object([
            JSONMember(key: "records", value: .number(String(manifest.totalRecords))),
            JSONMember(key: "sha256", value: .string(hasher.hexDigest())),
        ]).canonicalBytes
        trailer.append(UInt8(ascii: "\n"))
        compressor.compress(trailer, into: &output)
        compressor.finish(into: &output)
        try sink(output)
        output.removeAll()
    }

    private func skipEmptyCollections() throws {
        while collectionIndex < manifest.collections.count && writtenInCollection == manifest.collections[collectionIndex].records {
            collectionIndex += 1
            writtenInCollection = 0
        }
    }

    private func line(_ bytes: some Collection<UInt8>) throws {
        var text = Array(bytes)
        text.append(UInt8(ascii: "\n"))
        hasher.update(text)
        compressor.compress(text, into: &output)
        if output.count >= 1 << 16 {
            try sink(output)
            output.removeAll(keepingCapacity: true)
        }
    }
}

import DeltaAuthoring
import DeltaCore
import Foundation

/// The snapshot files of docs/conformance/snapshots/: three valid ones, and damaged ones, each
/// damaged in one way a reader must catch.
enum SnapshotVectors {
    static let tag = #"W/\"1.00000000000000aa.7.0000beef\""#
    static let date = "Thu, 01 Jan 1970 00:00:07 GMT"
    static let records = [#"{"id":"a","n":1}"#, #"{"id":"b","s":"é"}"#, #"{"id":"c","v":[1,2]}"#]

    /// (name, file bytes, what it is).
    static func all() throws -> [(String, [UInt8], String)] {
        let valid = try written(digests: true)
        var out: [(String, [UInt8], String)] = [
            ("valid", valid, "format 1.1: two collections (one empty) with state digests"),
            ("valid-1.0", try written(digests: false), "format 1.0: no digests"),
            (
                "valid-empty",
                try SnapshotWriterBytes.make(
                    try SnapshotManifest(collections: [.init(name: try CollectionName("items"), entityTag: tag, lastModified: date, records: 0)]), []),
                "one collection, no records"
            ),
        ]
        let manifest = String(decoding: try manifest(count: 3, digest: true).canonicalBytes, as: UTF8.self)
        let damaged: [(String, [String], String)] = [
            ("unsorted", [manifest, records[1], records[0], records[2]], "records not sorted by id"),
            ("duplicate-id", [manifest, records[0], records[0], records[2]], "the same id twice"),
            ("hidden-record", [manifest, records[0], #"{"hidden":true,"id":"b"}"#, records[2]], "a hidden record line"),
            ("not-canonical", [manifest, #"{"id":"a", "n":1}"#, records[1], records[2]], "a record line with white space"),
            ("number-out-of-range", [manifest, #"{"id":"a","n":1e+100001}"#, records[1], records[2]], "a number past the exponent limit"),
            ("too-few-records", [manifest, records[0], records[1]], "the manifest declares 3 records, 2 follow"),
            ("too-many-records", [manifest] + records + [#"{"id":"d"}"#], "the manifest declares 3 records, 4 follow"),
            ("digest-mismatch", [manifest, records[0], records[1], #"{"id":"c","v":[1,3]}"#], "the records do not sum to the manifest's digest"),
            ("unknown-major-version", [manifest.replacingOccurrences(of: #""version":"1.1""#, with: #""version":"3.0""#)] + records, "format 3.0"),
            ("not-a-manifest", [#"{"hello":"world"}"#] + records, "the first line is not a manifest"),
        ]
        for (name, lines, what) in damaged { out.append(("damaged-\(name)", try gzipped(lines, trailer: .right), what)) }
        out.append(("damaged-trailer-hash", try gzipped([manifest] + records, trailer: .wrongHash), "the trailer's SHA-256 is not the content's"))
        out.append(("damaged-trailer-count", try gzipped([manifest] + records, trailer: .wrongCount), "the trailer's count is not the records'"))
        out.append(("damaged-no-trailer", try gzipped([manifest] + records, trailer: .none), "no trailer line"))
        out.append(("damaged-truncated", Array(valid.prefix(valid.count * 2 / 3)), "the valid file cut to two thirds"))
        var flipped = valid
        flipped[valid.count / 2] ^= 0x10
        out.append(("damaged-bit-flip", flipped, "one bit of the compressed data flipped"))
        out.append(("damaged-trailing-bytes", valid + [0x0A], "a byte after the gzip member"))
        out += try blobVectors()
        return out
    }

    /// Format 2.0: a valid file with two blobs (one empty), and three damaged ones.
    private static func blobVectors() throws -> [(String, [UInt8], String)] {
        let photo = Array("not really a photo".utf8)
        let references = [
            BlobReference(hash: BlobHash.of([UInt8]()), size: 0, type: "text/plain"),
            BlobReference(hash: BlobHash.of(photo), size: Int64(photo.count), type: "image/jpeg"),
        ]
        let json = references.map { String(decoding: $0.json.canonicalBytes, as: UTF8.self) }
        let lines = [#"{"id":"a","photo":\#(json[1])}"#, #"{"empty":\#(json[0]),"id":"b","photo":\#(json[1])}"#]
        let bodies = try lines.map { try Record(parsing: Array($0.utf8)).body }
        let manifest = try SnapshotManifest(
            collections: [.init(name: try CollectionName("items"), entityTag: tag, lastModified: date, records: 2, digest: StateDigest(bodies: bodies))],
            blobs: true)
        var file: [UInt8] = []
        let writer = try SnapshotWriter(manifest: manifest) { file.append(contentsOf: $0) }
        for body in bodies { try writer.append(body: body) }
        for reference in writer.referencedBlobs {
            var bytes: [UInt8]? = reference.size == 0 ? nil : photo
            try writer.appendBlob(reference) {
                defer { bytes = nil }
                return bytes
            }
        }
        try writer.finish()
        let head = [String(decoding: manifest.canonicalBytes, as: UTF8.self)] + lines
        let changed = String(decoding: SnapshotBlobLines.line(Array("not really a phot0".utf8)), as: UTF8.self)
        let sorted = zip(references, json).sorted { $0.0.hash < $1.0.hash }
        func section(_ photoLine: String?) -> [String] {
            sorted.flatMap { reference, header in reference.size == 0 ? [header] : photoLine.map { [header, $0] } ?? [] }
        }
        return [
            ("valid-blobs", file, "format 2.0: two records, two blobs (one of no bytes)"),
            (
                "damaged-blob-hash", try gzipped(head + section(changed), trailer: .right, records: 2, blobs: 2),
                "a blob's bytes changed (the trailer's SHA-256 recomputed)"
            ),
            ("damaged-blob-missing", try gzipped(head + section(nil), trailer: .right, records: 2, blobs: 1), "a referenced blob left out"),
            ("damaged-blob-base64", try gzipped(head + section(#""not base64""#), trailer: .right, records: 2, blobs: 2), "a blob line that is not base64"),
        ]
    }

    private static func manifest(count: Int, digest: Bool) throws -> SnapshotManifest {
        let bodies = try records.prefix(count).map { try Record(parsing: Array($0.utf8)).body }
        return try SnapshotManifest(collections: [
            .init(name: try CollectionName("items"), entityTag: tag, lastModified: date, records: count, digest: digest ? StateDigest(bodies: bodies) : nil)
        ])
    }

    private static func written(digests: Bool) throws -> [UInt8] {
        let other = [#"{"id":"x"}"#]
        let otherDigest = StateDigest(bodies: try other.map { try Record(parsing: Array($0.utf8)).body })
        let bodies = try records.map { try Record(parsing: Array($0.utf8)).body }
        let manifest = try SnapshotManifest(collections: [
            .init(name: try CollectionName("items"), entityTag: tag, lastModified: date, records: 3, digest: digests ? StateDigest(bodies: bodies) : nil),
            .init(name: try CollectionName("more"), entityTag: tag, lastModified: date, records: 1, digest: digests ? otherDigest : nil),
            .init(name: try CollectionName("none"), entityTag: tag, lastModified: date, records: 0, digest: digests ? .empty : nil),
        ])
        return try SnapshotWriterBytes.make(manifest, bodies + other.map { Array($0.utf8) })
    }

    enum Trailer { case right, wrongHash, wrongCount, none }

    /// `lines` and a trailer, gzipped as the writer does, without the writer's checks; the
    /// trailer counts `records` (all lines but the manifest when nil), and `blobs` when given.
    static func gzipped(_ lines: [String], trailer: Trailer, records: Int? = nil, blobs: Int? = nil) throws -> [UInt8] {
        var content = Array(lines.map { $0 + "\n" }.joined().utf8)
        var hasher = SHA256()
        hasher.update(content)
        let hash = trailer == .wrongHash ? String(repeating: "0", count: 64) : hasher.hexDigest()
        let count = (records ?? lines.count - 1) + (trailer == .wrongCount ? 1 : 0)
        let blobCount = blobs.map { #""blobs":\#($0),"# } ?? ""
        if trailer != .none { content += Array(#"{\#(blobCount)"records":\#(count),"sha256":"\#(hash)"}"#.utf8) + [0x0A] }
        let compressor = try GzipCompressor()
        var out: [UInt8] = []
        compressor.compress(content, into: &out)
        compressor.finish(into: &out)
        return out
    }
}

/// A snapshot written by `SnapshotWriter` into memory.
enum SnapshotWriterBytes {
    static func make(_ manifest: SnapshotManifest, _ bodies: [[UInt8]]) throws -> [UInt8] {
        var file: [UInt8] = []
        let writer = try SnapshotWriter(manifest: manifest) { file.append(contentsOf: $0) }
        for body in bodies { try writer.append(body: body) }
        try writer.finish()
        return file
    }
}

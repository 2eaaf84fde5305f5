import DeltaAuthoring
import DeltaCore
import DeltaTestSupport
import Foundation
import Testing

@Suite("Snapshot format 2.0: blobs")
struct SnapshotBlobTests {
    static let photos = try! CollectionName("photos")
    static let tag = #"W/"1.00000000000000aa.7.0000beef""#
    static let date = "Thu, 01 Jan 1970 00:00:07 GMT"

    /// Blobs of 0 bytes, one line exactly, and three lines with a short last one; records that
    /// reference them (one twice, one record two, one none).
    static func sample(seed: UInt64) throws -> (SnapshotManifest, [Record], [BlobReference: [UInt8]]) {
        var random = SeededGenerator(seed: seed)
        let contents: [[UInt8]] = [
            [], (0..<SnapshotBlobLines.bytesPerLine).map { _ in UInt8.random(in: 0...255, using: &random) },
            (0..<(2 * SnapshotBlobLines.bytesPerLine + 1_001)).map { _ in UInt8.random(in: 0...255, using: &random) },
        ]
        var blobs: [BlobReference: [UInt8]] = [:]
        let references = contents.map { bytes in
            let reference = BlobReference(hash: BlobHash.of(bytes), size: Int64(bytes.count), type: "image/png")
            blobs[reference] = bytes
            return reference
        }
        func json(_ reference: BlobReference) -> String { String(decoding: reference.json.canonicalBytes, as: UTF8.self) }
        let records = try [
            #"{"id":"a","photo":\#(json(references[0]))}"#, #"{"id":"b","photos":[\#(json(references[1])),\#(json(references[2]))]}"#,
            #"{"id":"c"}"#, #"{"id":"d","deep":{"photo":\#(json(references[1]))}}"#,
        ].map { try Record(parsing: Array($0.utf8)) }
        let manifest = try SnapshotManifest(
            collections: [.init(name: photos, entityTag: tag, lastModified: date, records: records.count, digest: StateDigest(bodies: records.map(\.body)))],
            blobs: true)
        return (manifest, records, blobs)
    }

    static func write(_ manifest: SnapshotManifest, _ records: [Record], _ blobs: [BlobReference: [UInt8]]) throws -> [UInt8] {
        var file: [UInt8] = []
        let writer = try SnapshotWriter(manifest: manifest) { file.append(contentsOf: $0) }
        for record in records { try writer.append(body: record.body) }
        #expect(writer.referencedBlobs.map(\.hash) == blobs.keys.map(\.hash).sorted())
        for reference in writer.referencedBlobs {
            var bytes = blobs[reference]![...]
            // Handed over in uneven pieces, as a download would.
            try writer.appendBlob(reference) {
                defer { bytes = bytes.dropFirst(7_777) }
                return bytes.isEmpty ? nil : Array(bytes.prefix(7_777))
            }
        }
        try writer.finish()
        return file
    }

    @Test("Written and read back: records, then each blob in hash order, its bytes in lines of 49,152, checked and ended")
    func roundTrip() throws {
        let seed = SeededGenerator.seed(for: "SnapshotBlobTests.roundTrip")
        let (manifest, records, blobs) = try Self.sample(seed: seed)
        #expect(manifest.version.description == "2.0")
        let file = try Self.write(manifest, records, blobs)
        #expect(try Self.write(manifest, records, blobs) == file, "the same data bakes to the same bytes")
        var items: [SnapshotItem] = []
        let reader = try SnapshotReader(source: Self.pieces(file, 4_096))
        while let item = try reader.next() { items.append(item) }
        #expect(items.prefix(1 + records.count) == [.manifest(manifest)] + records.map { .record(Self.photos, $0) })
        var read: [(BlobReference, [UInt8])] = []
        var lineSizes: [Int] = []
        for item in items.dropFirst(1 + records.count) {
            switch item {
            case .blob(let reference): read.append((reference, []))
            case .blobBytes(let bytes):
                read[read.count - 1].1 += bytes
                lineSizes.append(bytes.count)
            case .blobEnd(let reference): #expect(reference == read.last?.0)
            default: Issue.record("unexpected \(item)")
            }
        }
        #expect(read.map(\.0.hash) == blobs.keys.map(\.hash).sorted())
        for (reference, bytes) in read { #expect(blobs[reference] == bytes, "\(reference.hash)") }
        #expect(lineSizes.sorted() == [1_001, 49_152, 49_152, 49_152])
        #expect(reader.blobCount == 3 && reader.blobBytes == Int64(3 * 49_152 + 1_001))
        let content = try Self.content(file)
        #expect(content.last == #"{"blobs":3,"records":4,"sha256":"\#(reader.contentDigest ?? "")"}"#)
    }

    @Test("A damaged blob section is refused, saying why, however the rest checks out")
    func damaged() throws {
        let (manifest, records, blobs) = try Self.sample(seed: 7)
        let lines = Array(try Self.content(try Self.write(manifest, records, blobs)).dropLast())
        let head = Array(lines.prefix(1 + records.count))
        // The blob section as groups: a header and its lines.
        var groups: [[String]] = []
        for line in lines.dropFirst(head.count) {
            if line.hasPrefix(#"{"$blob":"#) { groups.append([line]) } else { groups[groups.count - 1].append(line) }
        }
        let big = groups.firstIndex { $0.count == 4 }!
        var flipped = groups
        let first = flipped[big][1]
        flipped[big][1] = (first.dropFirst().first == "A" ? "\"B" : "\"A") + first.dropFirst(2)
        var stray = groups + [[#"{"$blob":"\#(BlobHash.of([0x61]).hex)","size":1,"type":"text/plain"}"#, #""YQ==""#]]
        stray.sort { $0[0] < $1[0] }
        var strayBits = groups
        strayBits[big][3] = Self.strayBits(groups[big][3])
        var short = groups
        short[big][1] = #""AAAA""#
        let cases: [(String, [[String]], Int?, String)] = [
            ("a changed byte", flipped, 3, "does not match its hash"),
            ("a blob left out", groups.filter { $0.count != 2 }, 2, "references a blob the snapshot does not hold"),
            ("a blob no record references", stray, 4, "holds a blob no record references"),
            ("blobs out of order", Array(groups.dropFirst()) + [groups[0]], 3, "breaks the order of the blobs"),
            ("stray bits in the last group", strayBits, 3, "canonical base64"),
            ("a short line", short, 3, "is not the base64 of 49152 bytes"),
            ("the trailer's count", groups, 4, "blob count differs"),
            ("no blob count", groups, nil, "lacks its blob count"),
        ]
        for (what, section, count, reason) in cases {
            let file = try SnapshotVectors.gzipped(head + section.joined(), trailer: .right, records: records.count, blobs: count)
            do {
                _ = try SnapshotTests.read(file, chunk: 65_536)
                Issue.record("\(what): accepted")
            } catch { #expect(error is WireError && "\(error)".contains(reason), "\(what): \(error)") }
        }
        #expect(try SnapshotTests.read(try SnapshotVectors.gzipped(head + groups.joined(), trailer: .right, records: records.count, blobs: 3)).count > 5)
        let whole = try Self.write(manifest, records, blobs)
        #expect(throws: WireError.self) { _ = try SnapshotTests.read(Array(whole.prefix(whole.count - 300)), chunk: 65_536) }
    }

    @Test("A writer refuses what its readers would: wrong bytes, an unreferenced blob, the wrong order, a blob left out")
    func writerRefuses() throws {
        let (manifest, records, blobs) = try Self.sample(seed: 11)
        let ordered = blobs.keys.sorted { $0.hash < $1.hash }
        func writer() throws -> SnapshotWriter {
            let writer = try SnapshotWriter(manifest: manifest) { _ in }
            for record in records { try writer.append(body: record.body) }
            return writer
        }
        #expect(throws: WireError.self) { try writer().appendBlob(ordered[1], bytes: Self.once([0x00])) }
        #expect(throws: WireError.self) { try writer().appendBlob(BlobReference(hash: BlobHash.of([1]), size: 1, type: "a/b")) { nil } }
        #expect(throws: WireError.self) {
            let writing = try writer()
            try writing.appendBlob(ordered[1]) { nil }
        }
        let partial = try writer()
        try partial.appendBlob(ordered[1], bytes: Self.once(blobs[ordered[1]]!))
        #expect(throws: WireError.self) { try partial.appendBlob(ordered[0]) { nil } }
        #expect(throws: WireError.self) { try partial.finish() }
        let noSection = try SnapshotWriter(manifest: try SnapshotManifest(collections: manifest.collections)) { _ in }
        for record in records { try noSection.append(body: record.body) }
        #expect(throws: WireError.self) { try noSection.appendBlob(ordered[0]) { nil } }
    }

    /// The decompressed lines of a snapshot.
    static func content(_ file: [UInt8]) throws -> [String] {
        var out: [UInt8] = []
        var decoder = ContentDecoder()
        try decoder.decode(Data(file)) { out += $0 }
        try decoder.finish()
        return String(decoding: out, as: UTF8.self).split(separator: "\n").map(String.init)
    }

    /// The base64 line with a set bit where its padding should make it zero.
    static func strayBits(_ line: String) -> String {
        var characters = Array(line)
        let last = characters.lastIndex { $0 != "=" && $0 != "\"" }!
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")
        characters[last] = alphabet[alphabet.firstIndex(of: characters[last])! ^ 1]
        return String(characters)
    }

    /// Hands `bytes` over once, then nil.
    static func once(_ bytes: [UInt8]) -> () -> [UInt8]? {
        var sent = false
        return {
            defer { sent = true }
            return sent ? nil : bytes
        }
    }

    static func pieces(_ file: [UInt8], _ size: Int) -> () -> [UInt8]? {
        var offset = 0
        return {
            guard offset < file.count else { return nil }
            defer { offset += size }
            return Array(file[offset..<min(file.count, offset + size)])
        }
    }
}

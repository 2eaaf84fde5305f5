import DeltaAuthoring
import DeltaCore
import DeltaTestSupport
import Foundation
import Testing

@Suite("Snapshot format")
struct SnapshotTests {
    static let widgets = try! CollectionName("widgets")
    static let gadgets = try! CollectionName("gadgets")

    /// Two collections (given in the wrong order, the manifest sorts them) and their records.
    static func sample() throws -> (SnapshotManifest, [(CollectionName, Record)]) {
        let widgetRecords = try (1...3).map { try Record(parsing: Array(#"{"id":"w\#($0)","price":\#($0).50,"name":"W \#($0)"}"#.utf8)) }
        let gadgetRecords = try ["a", "b"].map { try Record(parsing: Array(#"{"id":"\#($0)"}"#.utf8)) }
        let manifest = try SnapshotManifest(collections: [
            .init(name: widgets, entityTag: #"W/"1.00000000000000aa.7.0000beef""#, lastModified: "Thu, 01 Jan 1970 00:00:07 GMT", records: 3),
            .init(
                name: try CollectionName("empty"), entityTag: #"W/"1.00000000000000aa.0.00000000""#, lastModified: "Thu, 01 Jan 1970 00:00:00 GMT", records: 0),
            .init(name: gadgets, entityTag: #"W/"1.00000000000000aa.5.0000cafe""#, lastModified: "Thu, 01 Jan 1970 00:00:05 GMT", records: 2),
        ])
        return (manifest, gadgetRecords.map { (gadgets, $0) } + widgetRecords.map { (widgets, $0) })
    }

    static func write(_ manifest: SnapshotManifest, _ records: [(CollectionName, Record)]) throws -> [UInt8] {
        var file: [UInt8] = []
        let writer = try SnapshotWriter(manifest: manifest) { file.append(contentsOf: $0) }
        for (_, record) in records { try writer.append(body: record.body) }
        try writer.finish()
        return file
    }

    /// Reads a whole snapshot from memory in chunks of `chunk` bytes.
    static func read(_ file: [UInt8], chunk: Int = 7) throws -> [SnapshotItem] {
        var offset = 0
        let reader = try SnapshotReader {
            guard offset < file.count else { return nil }
            defer { offset += chunk }
            return Array(file[offset..<min(file.count, offset + chunk)])
        }
        var items: [SnapshotItem] = []
        while let item = try reader.next() { items.append(item) }
        return items
    }

    @Test("Written and read back: the manifest first, then every record of every collection, verified")
    func roundTrip() throws {
        let (manifest, records) = try Self.sample()
        #expect(manifest.collections.map(\.name.rawValue) == ["empty", "gadgets", "widgets"])
        let items = try Self.read(try Self.write(manifest, records))
        #expect(items == [.manifest(manifest)] + records.map { .record($0.0, $0.1) })
    }

    @Test("A large snapshot read in random pieces: lines across pieces, a 3.6 MB record longer than the reader's buffer, every record back exactly")
    func largeInRandomPieces() throws {
        let seed = SeededGenerator.seed(for: "SnapshotTests.largeInRandomPieces")
        var random = SeededGenerator(seed: seed)
        let big = String(repeating: "x", count: 900_000)
        var records = try (0..<20_000).map { index in
            try Record(
                parsing: Array(#"{"id":"r\#(String(format: "%06d", index))","n":\#(random.next() % 100_000),"s":"\#(String(random.next(), radix: 36))"}"#.utf8))
        }
        records[7_000] = try Record(parsing: Array(#"{"id":"r007000","big":["\#(big)","\#(big)","\#(big)","\#(big)"]}"#.utf8))
        let manifest = try SnapshotManifest(collections: [
            .init(name: Self.widgets, entityTag: #"W/"1.00000000000000aa.7.0000beef""#, lastModified: "Thu, 01 Jan 1970 00:00:07 GMT", records: records.count)
        ])
        let file = try Self.write(manifest, records.map { (Self.widgets, $0) })
        var offset = 0
        let reader = try SnapshotReader {
            guard offset < file.count else { return nil }
            let size = 1 + Int(random.next() % 4_096)
            defer { offset += size }
            return Array(file[offset..<min(file.count, offset + size)])
        }
        var items: [SnapshotItem] = []
        while let item = try reader.next() { items.append(item) }
        #expect(items == [.manifest(manifest)] + records.map { .record(Self.widgets, $0) }, "seed \(seed)")
        #expect(reader.contentDigest != nil)
    }

    @Test("The same data bakes to the same bytes, readable by gzip and zcat")
    func reproducible() async throws {
        let (manifest, records) = try Self.sample()
        let first = try Self.write(manifest, records)
        let second = try Self.write(manifest, records)
        #expect(first == second)
        #expect(Array(first.prefix(10)) == [0x1F, 0x8B, 8, 0, 0, 0, 0, 0, 0, 255])
        let text = String(decoding: try gunzip(first), as: UTF8.self)
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
        #expect(lines.count == 8)  // manifest, 5 records, trailer, and the empty string after the last newline
        #expect(
            lines[0]
                == #"{"collections":[{"etag":"W/\"1.00000000000000aa.0.00000000\"","lastModified":"Thu, 01 Jan 1970 00:00:00 GMT","name":"empty","records":0},{"etag":"W/\"1.00000000000000aa.5.0000cafe\"","lastModified":"Thu, 01 Jan 1970 00:00:05 GMT","name":"gadgets","records":2},{"etag":"W/\"1.00000000000000aa.7.0000beef\"","lastModified":"Thu, 01 Jan 1970 00:00:07 GMT","name":"widgets","records":3}],"format":"deltasnap-snapshot","version":"1.0"}"#
        )
        #expect(lines[1] == #"{"id":"a"}"#)
        #expect(lines[3] == #"{"id":"w1","name":"W 1","price":1.5}"#)
        var hasher = SHA256()
        hasher.update(Array(lines[0..<6].joined(separator: "\n").utf8) + [UInt8(ascii: "\n")])
        #expect(lines[6] == "{\"records\":5,\"sha256\":\"\(hasher.hexDigest())\"}")

        let path = FileManager.default.temporaryDirectory.appendingPathComponent("snapshot-\(UUID().uuidString).snapshot").path
        try Data(first).write(to: URL(fileURLWithPath: path))
        defer { try? FileManager.default.removeItem(atPath: path) }
        for (tool, arguments) in [("/bin/gzip", ["-t", path]), ("/bin/zcat", [path])] {
            let (status, printed) = try await runProgram(tool, arguments)
            #expect(status == 0, "\(tool) refused the snapshot: \(printed)")
        }
    }

    @Test("Every truncation, and every flipped bit that changes what the file says, is detected")
    func damage() throws {
        let (manifest, records) = try Self.sample()
        let file = try Self.write(manifest, records)
        for length in 0..<file.count {
            #expect(throws: WireError.self, "truncated to \(length) bytes") { try Self.read(Array(file.prefix(length))) }
        }
        let content = try gunzip(file)
        var harmless = 0
        for index in 0..<file.count {
            for bit in 0..<8 {
                var damaged = file
                damaged[index] ^= 1 << bit
                // Header fields zlib ignores (flags, mtime, xfl, os) and padding bits after the last
                // deflate block change nothing the file says: those flips are harmless, not missed.
                if (try? gunzip(damaged)) == content {
                    harmless += 1
                    continue
                }
                #expect(throws: WireError.self, "byte \(index) bit \(bit) flipped") { try Self.read(damaged) }
            }
        }
        #expect(harmless < 64, "\(harmless) of \(file.count * 8) flips changed nothing")
        #expect(throws: WireError(.compression, "data after the end of the compressed stream", evidence: "1 more bytes")) {
            try Self.read(file + [0], chunk: file.count + 1)
        }
    }

    @Test("Content that gzip accepts but the format does not is refused, saying why")
    func invalidContent() throws {
        func snapshot(_ lines: [String]) throws -> [UInt8] { try gzip(Array(lines.map { $0 + "\n" }.joined().utf8)) }
        let manifest = #"{"collections":[{"etag":"e","lastModified":"d","name":"w","records":2}],"format":"deltasnap-snapshot","version":"1.0"}"#
        var hasher = SHA256()
        hasher.update(Array((manifest + "\n" + #"{"id":"b"}"# + "\n" + #"{"id":"a"}"# + "\n").utf8))
        let cases: [([String], String)] = [
            (
                [manifest.replacingOccurrences(of: "1.0", with: "3.0")],
                "snapshot: format version 3.0 is not readable by this build (this build reads 1.x and 2.x; update DeltaSnapshot)"
            ),
            ([manifest.replacingOccurrences(of: "deltasnap-snapshot", with: "other")], #"snapshot: not a DeltaSnapshot snapshot (format is "other")"#),
            (
                [manifest, #"{"id":"b"}"#, #"{"id":"a"}"#, "{\"records\":2,\"sha256\":\"\(hasher.hexDigest())\"}"],
                #"snapshot: line 3 breaks the id order of w ("a" after "b")"#
            ),
            ([manifest, #"{"id":"a","hidden":true}"#], #"snapshot: line 2 is a hidden record; snapshots hold visible records only (a)"#),
            ([manifest, #"{ "id":"a"}"#], "snapshot: line 2 is not in canonical form (a)"),
            ([manifest, #"{"id":"a"}"#], "snapshot: the file is truncated (it ends after line 2, before the trailer)"),
            ([manifest, #"{"id":"a"}"#, #"{"id":"b"}"#, #"{"records":2,"sha256":"00"}"#], "snapshot: the content does not match its SHA-256"),
        ]
        for (lines, message) in cases {
            do {
                _ = try Self.read(try snapshot(lines))
                Issue.record("accepted \(lines)")
            } catch {
                #expect("\(error)".hasPrefix(message), "\(error)")
            }
        }
    }

    @Test("A manifest's state digest (format 1.1) is checked against each collection's records as they stream")
    func manifestDigest() throws {
        let bodies = [Array(#"{"id":"a","n":1}"#.utf8), Array(#"{"id":"b","n":2}"#.utf8)]
        let name = try CollectionName("w")
        func snapshot(_ digest: StateDigest) throws -> [UInt8] {
            let manifest = try SnapshotManifest(collections: [.init(name: name, entityTag: "e", lastModified: "d", records: 2, digest: digest)])
            #expect(manifest.version.description == "1.1")
            var bytes: [UInt8] = []
            let writer = try SnapshotWriter(manifest: manifest) { bytes.append(contentsOf: $0) }
            for body in bodies { try writer.append(body: body) }
            try writer.finish()
            return bytes
        }
        let right = StateDigest(bodies: bodies)
        var whole = try snapshot(right)
        let reader = try SnapshotReader {
            defer { whole = [] }
            return whole.isEmpty ? nil : whole
        }
        while try reader.next() != nil {}
        #expect(reader.digests[name] == right)
        #expect(
            throws: WireError(
                .snapshot, "the records of w do not match the manifest's state digest",
                evidence: "manifest \(StateDigest(bodies: bodies.prefix(1)).hex.prefix(16))…, records \(right.hex.prefix(16))…")
        ) {
            _ = try Self.read(try snapshot(StateDigest(bodies: bodies.prefix(1))))
        }
        let text = #"{"collections":[{"digest":"ABC","etag":"e","lastModified":"d","name":"w","records":0}],"format":"deltasnap-snapshot","version":"1.1"}"#
        #expect(throws: WireError(.snapshot, "a manifest collection's digest is not 64 lowercase hex digits", evidence: "w")) {
            try SnapshotManifest(parsing: Array(text.utf8))
        }
    }

    @Test("A writer refuses more or fewer records than its manifest declares")
    func writerCounts() throws {
        let (manifest, records) = try Self.sample()
        #expect(throws: WireError(.snapshot, "fewer records than the manifest declares", evidence: "gadgets: 1 of 2")) {
            try Self.write(manifest, Array(records.prefix(1)))
        }
        #expect(throws: WireError(.snapshot, "more records than the manifest declares", evidence: "5 declared")) {
            try Self.write(manifest, records + records.prefix(1))
        }
    }
}

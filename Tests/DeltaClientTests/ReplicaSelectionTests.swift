import DeltaAuthoring
import DeltaClient
import DeltaCore
import DeltaSQLite
import DeltaSQLiteStore
import DeltaStore
import DeltaTestSupport
import Foundation
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

@Suite("Replica: selections, change notifications")
struct ReplicaSelectionTests {
    static let red = try! Selection(filter: #"{"c":{"eq":"red"}}"#, limit: "3")

    /// What a replica of `selection` must hold, given the server's visible records.
    static func expected(_ server: [String: String], _ selection: Selection) throws -> [String: String] {
        try selection.expectedState(of: server)
    }

    @Test("a whole-collection snapshot is installed cut to the selection, the first sync downloads the selection, deltas keep it exact and name what changed")
    func selectionFromWholeSnapshot() async throws {
        try await withHarness { harness in
            try await harness.putMany((0..<10).map { #"{"id":"r\#($0)","c":"\#($0 % 2 == 0 ? "red" : "blue")"}"# })
            let snapshot = try await harness.bake("whole")
            var configuration = harness.configuration(snapshot: snapshot)
            configuration.selections = [items: Self.red]
            let replica = try await Replica.open(configuration)
            await #expect(try replica.contents().keys.sorted() == ["r0", "r2", "r4"])
            var report = try await replica.sync()
            #expect(report.collections.first?.outcome == .replaced(records: 3))
            #expect(report.collections.first?.changed == .all)
            await #expect(try replica.contents() == Self.expected(try await harness.serverRecords(), Self.red))
            // r2 leaves (edited out), r1 enters (edited in): r1 arrives, r2 goes, r4 is still inside.
            try await harness.put(#"{"id":"r2","c":"blue"}"#, #"{"id":"r1","c":"red"}"#)
            report = try await replica.sync()
            #expect(report.collections.first?.changed == .ids(["r1", "r2"]))
            await #expect(try replica.contents() == Self.expected(try await harness.serverRecords(), Self.red))
            await #expect(try replica.contents().keys.sorted() == ["r0", "r1", "r4"])
            // A change outside the selection: 304, nothing changed.
            try await harness.put(#"{"id":"r9","c":"green"}"#)
            report = try await replica.sync()
            #expect(report.collections.first?.outcome == .notModified)
            #expect(report.collections.first?.changed == .ids([]))
            // r0 hidden: r6 is pulled inside the limit.
            try await harness.hide("r0")
            report = try await replica.sync()
            #expect(report.collections.first?.changed == .ids(["r0", "r6"]))
            await #expect(try replica.contents().keys.sorted() == ["r1", "r4", "r6"])
        }
    }

    @Test("a snapshot baked for the selection syncs by delta from its token; changing the selection resets the collection, keeping it does not")
    func selectionSnapshotAndChange() async throws {
        try await withHarness { harness in
            try await harness.putMany((0..<10).map { #"{"id":"r\#($0)","c":"\#($0 % 2 == 0 ? "red" : "blue")","n":\#($0)}"# })
            let snapshot = try await bakeSelection(harness, Self.red)
            try await harness.put(#"{"id":"r4","c":"red","n":40}"#)
            var configuration = harness.configuration(snapshot: snapshot)
            configuration.selections = [items: Self.red]
            var replica: Replica? = try await Replica.open(configuration)
            let report = try await replica!.sync()
            #expect(report.collections.first?.outcome == .applied(upserted: 1, hidden: 0))
            await #expect(try replica!.contents() == Self.expected(try await harness.serverRecords(), Self.red))
            replica = nil
            replica = try await Replica.open(configuration)
            #expect(replica!.openReport.installed == [])
            configuration.selections = [items: try Selection(filter: #"{"n":{"gte":5}}"#, limit: nil)]
            replica = nil
            replica = try await Replica.open(configuration)
            #expect(replica!.openReport.installed == [items])
            _ = try await replica!.sync()
            await #expect(try replica!.contents().keys.sorted() == ["r4", "r5", "r6", "r7", "r8", "r9"])  // r4 now has n 40
            configuration.selections = [:]
            replica = nil
            replica = try await Replica.open(configuration)
            #expect(replica!.openReport.installed == [items])
            _ = try await replica!.sync()
            await #expect(try replica!.contents() == (try await harness.serverRecords()))
        }
    }

    @Test("changing one collection's selection resets that collection alone")
    func changeResetsOnlyThatCollection() async throws {
        try await withHarness { harness in
            try await harness.putMany((0..<6).map { #"{"id":"r\#($0)","c":"\#($0 % 2 == 0 ? "red" : "blue")"}"# })
            let other = try CollectionName("other")
            _ = try await harness.store.write(to: other) { try await $0.upsert(try Record(parsing: Array(#"{"id":"o1"}"#.utf8))) }
            // A snapshot of both collections, read in one transaction, as `deltasnap bake --db` does.
            let read = try await harness.store.openFullRead([try CollectionName(items), other])
            let manifest = try SnapshotManifest(
                collections: read.collections.map {
                    .init(name: $0.name, entityTag: $0.token.entityTag, lastModified: $0.token.lastModified, records: $0.records)
                })
            var bytes: [UInt8] = []
            let writer = try SnapshotWriter(manifest: manifest) { bytes.append(contentsOf: $0) }
            for entry in manifest.collections {
                while let batch = try await read.next(entry.name, maximumBytes: 1 << 16) { try batch.forEach { body, _ in try writer.append(body: body) } }
            }
            try writer.finish()
            read.close()
            let snapshot = harness.directory.appendingPathComponent("two.snapshot")
            try Data(bytes).write(to: snapshot)
            var configuration = harness.configuration(snapshot: snapshot)
            configuration.selections = [items: Self.red]
            var replica: Replica? = try await Replica.open(configuration)
            #expect(replica!.openReport.installed.sorted() == ["items", "other"])
            _ = try await replica!.sync()
            let otherTag = try await replica!.entityTag(of: "other")
            replica = nil
            configuration.selections = [items: try Selection(filter: #"{"c":{"eq":"blue"}}"#, limit: nil)]
            replica = try await Replica.open(configuration)
            #expect(replica!.openReport.installed == ["items"])
            await #expect(try replica!.entityTag(of: "other") == otherTag)
            _ = try await replica!.sync()
            await #expect(try replica!.contents().keys.sorted() == ["r1", "r3", "r5"])
            await #expect(try replica!.records(in: "other").map(\.id) == ["o1"])
        }
    }

    @Test(
        "before the first sync of a selection installed from a whole-collection snapshot, a new record and an edit are based on the snapshot's token and applied by that sync, without a conflict"
    )
    func putBeforeFirstSync() async throws {
        try await withHarness { harness in
            try await harness.putMany((0..<6).map { #"{"id":"r\#($0)","c":"\#($0 % 2 == 0 ? "red" : "blue")"}"# })
            var configuration = harness.configuration(snapshot: try await harness.bake("whole"))
            configuration.selections = [items: Self.red]
            let replica = try await Replica.open(configuration)
            await #expect(try replica.entityTag(of: items) == "", "the snapshot was baked for another selection: no token yet")
            try await replica.put(try record(#"{"id":"n1","c":"red"}"#), in: items)
            try await replica.put(try record(#"{"id":"r0","c":"red","edited":true}"#), in: items)
            // Nothing changed on the server since the bake: its ETag is the snapshot's token.
            let (_, response) = try await URLSession.shared.data(from: harness.apiURL().appendingPathComponent(items))
            let snapshotToken = try #require((response as? HTTPURLResponse)?.value(forHTTPHeaderField: "ETag"))
            let outbox = try Connection(path: ReplicaFiles.outboxURL(forStore: configuration.storeURL).path)
            #expect(
                try outbox.integer("SELECT count(*) FROM mutations WHERE base = ?", .text(snapshotToken)) == 2,
                "the records were cut from the snapshot: its token names the copies the app saw")
            let report = try await replica.sync()
            #expect(report.pushed.applied == 2)
            #expect(report.pushed.conflicts.isEmpty)
            #expect(try await harness.serverRecords()["n1"] == #"{"c":"red","id":"n1"}"#)
            #expect(try await harness.serverRecords()["r0"] == #"{"c":"red","edited":true,"id":"r0"}"#)
            _ = try await replica.sync()
            await #expect(try replica.state(of: "n1", in: items) == .synced)
            await #expect(try replica.contents() == Self.expected(try await harness.serverRecords(), Self.red))
        }
    }

    @Test("a mutation an older version queued with an empty base is pushed with base null: the stuck write is applied")
    func queuedEmptyBaseIsMended() async throws {
        try await withHarness { harness in
            try await harness.putMany((0..<6).map { #"{"id":"r\#($0)","c":"\#($0 % 2 == 0 ? "red" : "blue")"}"# })
            var configuration = harness.configuration(snapshot: try await harness.bake("whole"))
            configuration.selections = [items: Self.red]
            do {
                let replica = try await Replica.open(configuration)
                try await replica.put(try record(#"{"id":"n1","c":"red"}"#), in: items)
            }
            // As the earlier version left it: the collection's empty ETag as its base, numbered 1 by
            // the push the server refused (`400 invalid-push`, so it recorded nothing).
            let outbox = try Connection(path: ReplicaFiles.outboxURL(forStore: configuration.storeURL).path, mode: .readWrite)
            try outbox.execute(
                """
                UPDATE mutations SET base = '', mutation = 1; UPDATE overlay SET base = '';
                INSERT OR REPLACE INTO meta(key, value) VALUES ('last_mutation', '1')
                """)
            let replica = try await Replica.open(configuration)
            let report = try await replica.sync()
            #expect(report.pushed.applied == 1)
            #expect(report.pushed.conflicts.isEmpty)
            #expect(try await harness.serverRecords()["n1"] == #"{"c":"red","id":"n1"}"#)
            _ = try await replica.sync()
            await #expect(try replica.state(of: "n1", in: items) == .synced)
        }
    }

    /// A snapshot of `selection` baked from the server, as `deltasnap bake --url …?filter=…` does.
    func bakeSelection(_ harness: Harness, _ selection: Selection) async throws -> URL {
        var configuration = harness.configuration("baker", snapshot: try await harness.bake("whole"))
        configuration.selections = [items: selection]
        let url = try #require(
            URL(
                string: configuration.serverURL.absoluteString + "/" + items + "?filter=" + selection.filterText!.addingPercentEncoding(
                    withAllowedCharacters: .alphanumerics)! + "&limit=\(selection.limit!)"))
        let (data, response) = try await URLSession.shared.data(from: url)
        let http = try #require(response as? HTTPURLResponse)
        var body = EnvelopeReader(collection: try CollectionName(items))
        try body.feed(Array(data))
        try body.finish()
        var records: [Record] = []
        while let record = try body.next() { records.append(record) }
        let manifest = try SnapshotManifest(collections: [
            .init(
                name: try CollectionName(items), entityTag: try #require(http.value(forHTTPHeaderField: "ETag")),
                lastModified: try #require(http.value(forHTTPHeaderField: "Last-Modified")), records: records.count)
        ])
        var bytes: [UInt8] = []
        let writer = try SnapshotWriter(manifest: manifest) { bytes.append(contentsOf: $0) }
        for record in records { try writer.append(body: record.body) }
        try writer.finish()
        let file = harness.directory.appendingPathComponent("selection.snapshot")
        try Data(bytes).write(to: file)
        return file
    }
}

import DeltaClient
import DeltaCore
import DeltaSQLite
import DeltaTestSupport
import Foundation
import Testing

/// What a reset should report for a tampered answer.
struct ResetCase: Sendable, CustomStringConvertible {
    let tamper: Tamper
    let expected: @Sendable (ResetReason) -> Bool
    let description: String
}

let resetCases: [ResetCase] = [
    ResetCase(tamper: .truncate, expected: { if case .undecodableBody = $0 { true } else { false } }, description: "truncated body"),
    ResetCase(tamper: .corruptGzip, expected: { if case .undecodableBody = $0 { true } else { false } }, description: "corrupt gzip"),
    ResetCase(
        tamper: .corruptGzipEncoded, expected: { if case .undecodableBody = $0 { true } else { false } }, description: "corrupt gzip, Content-Encoding: gzip"),
    ResetCase(tamper: .wrongShape, expected: { if case .invalidRecord = $0 { true } else { false } }, description: "record without id"),
    ResetCase(tamper: .otherBase, expected: { if case .integrity = $0 { true } else { false } }, description: "delta for another token"),
]

@Suite("Replica: reset to the pristine snapshot")
struct ReplicaResetTests {
    @Test("an answer that cannot be applied resets to the snapshot and syncs again from its token", arguments: resetCases)
    func resetOnBadAnswer(_ reset: ResetCase) async throws {
        try await withHarness { harness in
            // Enough records that the delta below (3 records) stays smaller than the collection.
            try await harness.put(#"{"id":"a","n":1}"#, #"{"id":"b","n":2}"#, #"{"id":"x1"}"#, #"{"id":"x2"}"#)
            let snapshot = try await harness.bake("v1")
            let replica = try await Replica.open(harness.configuration(snapshot: snapshot, viaProxy: true))
            try await harness.put(#"{"id":"c","n":3}"#)
            _ = try await replica.sync()
            try await harness.put(#"{"id":"a","n":10}"#)
            try await harness.hide("b")
            harness.proxy.plan(reset.tamper)
            let report = try await replica.sync()
            let entry = try #require(report.collections.first)
            let reason = try #require(entry.reset)
            #expect(reset.expected(reason), "reset reason \(reason)")
            // Synced again from the snapshot's token: everything since the snapshot, as a delta.
            #expect(entry.outcome == .applied(upserted: 2, hidden: 1))
            #expect(harness.proxy.requests.last?.ifNoneMatch == (try SnapshotManifestProbe.entityTag(snapshot)))
            #expect(try await replica.contents() == harness.serverRecords())
        }
    }

    @Test("when even the full dataset cannot be applied, the collection is left at the snapshot and the sync fails")
    func everythingFails() async throws {
        try await withHarness { harness in
            try await harness.put(#"{"id":"a"}"#)
            let snapshot = try await harness.bake("v1")
            let replica = try await Replica.open(harness.configuration(snapshot: snapshot, viaProxy: true))
            try await harness.put(#"{"id":"b"}"#)
            _ = try await replica.sync()
            try await harness.put(#"{"id":"c"}"#)
            harness.proxy.plan(.wrongShape, .truncate, .wrongShape)
            let error = await #expect(throws: ReplicaError.self) { try await replica.sync() }
            #expect(error?.kind == .unusableAnswer)
            #expect(
                error?.description.hasPrefix(
                    "unusable answer: the full dataset cannot be applied either; the collection is back at the bundled snapshot (items: invalid record: ")
                    == true)
            #expect(harness.proxy.requests.map { $0.ifNoneMatch == nil } == [false, false, false, true])
            await #expect(try replica.contents() == ["a": #"{"id":"a"}"#])
            await #expect(try replica.entityTag(of: items) == (try SnapshotManifestProbe.entityTag(snapshot)))
        }
    }

    @Test("the server's reset signal (a rolled-back history: ahead) resets to the snapshot and applies the delta from it")
    func serverSignalAhead() async throws {
        let keep = URL(fileURLWithPath: try makeTemporaryDirectory("deltaclient-keep"))
        defer { try? FileManager.default.removeItem(at: keep) }
        let id: UInt64 = 0x0123_4567_89AB_CDEF
        try await withHarness(databaseID: id) { harness in
            try await harness.put(#"{"id":"a"}"#)
            try FileManager.default.copyItem(at: try await harness.bake("v1"), to: keep.appendingPathComponent("v1.snapshot"))
            var configuration = harness.configuration(snapshot: keep.appendingPathComponent("v1.snapshot"))
            configuration.storeURL = keep.appendingPathComponent("replica.sqlite")
            let replica = try await Replica.open(configuration)
            try await harness.put(#"{"id":"b"}"#)
            try await harness.put(#"{"id":"c"}"#)
            _ = try await replica.sync()
            await #expect(try replica.count(in: items) == 3)
        }
        // The same database identity, rebuilt with another history after position 1.
        try await withHarness(databaseID: id) { harness in
            try await harness.put(#"{"id":"a"}"#)
            try await harness.put(#"{"id":"z"}"#)
            var configuration = harness.configuration(snapshot: keep.appendingPathComponent("v1.snapshot"))
            configuration.storeURL = keep.appendingPathComponent("replica.sqlite")
            let replica = try await Replica.open(configuration)
            #expect(replica.openReport.installed.isEmpty)
            let report = try await replica.sync()
            #expect(report.collections.first?.reset == .serverSignal("ahead"))
            #expect(report.collections.first?.outcome == .applied(upserted: 1, hidden: 0))
            #expect(try await replica.contents() == harness.serverRecords())
        }
    }

    @Test("a server of another database rejects the stored token and the snapshot's: the replica fetches the full dataset")
    func foreignDatabaseFallsBackToFull() async throws {
        let keep = URL(fileURLWithPath: try makeTemporaryDirectory("deltaclient-keep"))
        defer { try? FileManager.default.removeItem(at: keep) }
        try await withHarness { harness in
            try await harness.put(#"{"id":"a"}"#, #"{"id":"b"}"#)
            try FileManager.default.copyItem(at: try await harness.bake("v1"), to: keep.appendingPathComponent("v1.snapshot"))
            var configuration = harness.configuration(snapshot: keep.appendingPathComponent("v1.snapshot"))
            configuration.storeURL = keep.appendingPathComponent("replica.sqlite")
            _ = try await Replica.open(configuration).sync()
        }
        try await withHarness { harness in
            try await harness.put(#"{"id":"x"}"#, #"{"id":"y"}"#, #"{"id":"z"}"#)
            var configuration = harness.configuration(snapshot: keep.appendingPathComponent("v1.snapshot"))
            configuration.storeURL = keep.appendingPathComponent("replica.sqlite")
            let report = try await Replica.open(configuration).sync()
            #expect(report.collections.first?.reset == .serverSignal("foreign-database"))
            #expect(report.collections.first?.outcome == .replaced(records: 3))
            #expect(try await Replica.open(configuration).contents() == harness.serverRecords())
        }
    }

    @Test("a local store that fails its integrity check is rebuilt from the snapshot on open")
    func corruptStoreIsRebuilt() async throws {
        try await withHarness { harness in
            try await harness.put(#"{"id":"a"}"#, #"{"id":"b"}"#)
            let snapshot = try await harness.bake("v1")
            let snapshotState = try await harness.serverRecords()
            let configuration = harness.configuration(snapshot: snapshot)
            do {
                let replica = try await Replica.open(configuration)
                try await harness.put(#"{"id":"c"}"#)
                _ = try await replica.sync()
                await #expect(try replica.count(in: items) == 3)
            }
            // Move everything into the main file, then damage every page after the first.
            try Connection(path: configuration.storeURL.path).execute("PRAGMA wal_checkpoint(TRUNCATE)")
            let size = try #require(try FileManager.default.attributesOfItem(atPath: configuration.storeURL.path)[.size] as? Int)
            let handle = try FileHandle(forUpdating: configuration.storeURL)
            try handle.seek(toOffset: 4096)
            try handle.write(contentsOf: Data(repeating: 0xA5, count: size - 4096))
            try handle.close()
            let replica = try await Replica.open(configuration)
            #expect(replica.openReport.installed == [items])
            guard case .corruptStore = replica.openReport.rebuilt else {
                Issue.record("expected a rebuild, got \(replica.openReport)")
                return
            }
            await #expect(try replica.contents() == snapshotState)
            _ = try await replica.sync()
            #expect(try await replica.contents() == harness.serverRecords())
        }
    }

    @Test("a newer bundled snapshot (an app update) is adopted on open; an older one is ignored")
    func newerAndOlderSnapshots() async throws {
        try await withHarness { harness in
            try await harness.put(#"{"id":"a","v":1}"#)
            let old = try await harness.bake("v1")
            try await harness.put(#"{"id":"a","v":2}"#)
            let configuration = harness.configuration(snapshot: old)
            do {
                let replica = try await Replica.open(configuration)
                _ = try await replica.sync()
                await #expect(try replica.record("a", in: items)?.body == Array(#"{"id":"a","v":2}"#.utf8))
            }
            try await harness.put(#"{"id":"a","v":3}"#, #"{"id":"b"}"#)
            var updated = configuration
            updated.snapshotURL = try await harness.bake("v3")
            let adopted = try await Replica.open(updated)
            #expect(adopted.openReport.installed == [items])
            #expect(try await adopted.contents() == harness.serverRecords())
            await #expect(try adopted.entityTag(of: items) == (try SnapshotManifestProbe.entityTag(updated.snapshotURL)))

            let downgraded = try await Replica.open(configuration)
            #expect(downgraded.openReport.installed.isEmpty)
            #expect(try await downgraded.contents() == harness.serverRecords())
        }
    }
}

/// Reads a snapshot's manifest for assertions.
enum SnapshotManifestProbe {
    static func entityTag(_ url: URL) throws -> String {
        let data = try Data(contentsOf: url)
        let line = try gunzip(data).prefix { $0 != UInt8(ascii: "\n") }
        return try #require(SnapshotManifest(parsing: Array(line)).collections.first?.entityTag)
    }
}

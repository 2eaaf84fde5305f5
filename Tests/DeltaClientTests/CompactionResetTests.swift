import DeltaClient
import DeltaCore
import DeltaSQLiteStore
import DeltaStore
import DeltaTestSupport
import Foundation
import Testing

@Suite("Replica: after the server compacts")
struct CompactionResetTests {
    @Test(
        "a replica newer than the horizon keeps syncing deltas; one older resets, and when its snapshot is older too, downloads the full dataset; a baked token kept by compaction keeps resets to one delta"
    )
    func replicasAcrossTheHorizon() async throws {
        try await withHarness { harness in
            try await harness.putMany((0..<6).map { #"{"id":"r\#($0)","v":0}"# })
            let snapshot = try await harness.bake("v0")
            let current = try await Replica.open(harness.configuration("current", snapshot: snapshot))
            let stale = try await Replica.open(harness.configuration("stale", snapshot: snapshot))
            try await harness.put(#"{"id":"r1","v":1}"#)
            try await harness.hide("r2")
            try await harness.put(#"{"id":"r9","v":1}"#)  // a collection's newest record is never dropped: r2 must not be it
            _ = try await current.sync()
            // Compact up to the current replica's token: the snapshot's and the stale replica's are older.
            let head = try await harness.store.headPosition()
            let report = try await harness.store.compact(before: head, dropBaked: false, dryRun: false)
            #expect(report.horizon == head && report.droppedHidden == 1)
            try await harness.put(#"{"id":"r3","v":1}"#)
            let kept = try await current.sync()
            #expect(kept.collections.first?.reset == nil && kept.collections.first?.outcome == .applied(upserted: 1, hidden: 0))
            let reset = try await stale.sync()
            #expect(reset.collections.first?.reset == .serverSignal("expired"))
            #expect(reset.collections.first?.outcome == .replaced(records: 6), "the snapshot's token is expired too: the full dataset")
            let server = try await harness.serverRecords()
            #expect(try await current.contents() == server)
            #expect(try await stale.contents() == server)

            // A snapshot whose bake was recorded holds the horizon: a reset stays snapshot + one delta.
            let baked = try await harness.bake("v1")
            let bakedTag = try SnapshotManifestProbe.entityTag(baked)
            try await harness.store.recordBakes([(try CollectionName(items), try Token(entityTag: bakedTag))])
            let later = try await Replica.open(harness.configuration("later", snapshot: baked))
            try await harness.put(#"{"id":"r4","v":1}"#)
            _ = try await later.sync()
            try await harness.put(#"{"id":"r5","v":1}"#)
            let held = try await harness.store.compact(before: try await harness.store.headPosition(), dropBaked: false, dryRun: false)
            #expect(held.horizon == (try Token(entityTag: bakedTag)).position && held.keptFor.count == 1)
            try await harness.put(#"{"id":"r0","v":2}"#)
            let fresh = try await Replica.open(harness.configuration("fresh", snapshot: baked))
            let first = try await fresh.sync()
            #expect(first.collections.first?.reset == nil && first.collections.first?.outcome == .applied(upserted: 3, hidden: 0))
            await #expect(try fresh.contents() == (try await harness.serverRecords()))
        }
    }
}

import DeltaClient
import DeltaCore
import DeltaSQLite
import DeltaTestSupport
import Foundation
import Testing

@Suite("Observation from the database: what a commit wrote wakes the live queries, whoever wrote it")
struct ChangeLogTests {
    @Test(
        "two Replica objects on one store, and the command line's ReplicaFiles: a write through any wakes the others' live queries, and only of that collection"
    )
    func writersInOneProcess() async throws {
        try await withHarness { harness in
            try await harness.put(#"{"id":"a","v":1}"#)
            let configuration = harness.configuration(snapshot: try await harness.bake("v1"))
            let app = try await Replica.open(configuration)
            let widget = try await Replica.open(configuration)
            let seen = Yields()
            let following = follow(widget, RecordQuery(items), into: seen)
            defer { following.cancel() }
            #expect(try await eventually { seen.count == 1 })
            // The app writes; the widget's live query (another object, its own connections) wakes.
            try await app.put(try Record(parsing: Array(#"{"id":"b","v":2}"#.utf8)), in: items)
            #expect(try await eventually { seen.last == [#"{"id":"a","v":1}"#, #"{"id":"b","v":2}"#] })
            // A tool's write through ReplicaFiles (as `deltasnap put` makes it) wakes it too.
            try ReplicaFiles(storeURL: configuration.storeURL).delete("a", in: items)
            #expect(try await eventually { seen.last == [#"{"id":"b","v":2}"#] })
            // A sync of the app (the server's row for "c") wakes the widget's query.
            try await harness.put(#"{"id":"c","v":3}"#)
            _ = try await app.sync()
            #expect(try await eventually { seen.last?.contains(#"{"id":"c","v":3}"#) == true })
            #expect(seen.count == 4, "one result per change: \(seen.values.withLock { $0 })")
        }
    }

    @Test("another process's writes (deltasnap put and delete on the same store) wake a live query within seconds")
    func anotherProcess() async throws {
        try await withHarness { harness in
            try await harness.put(#"{"id":"a","v":1}"#)
            let configuration = harness.configuration(snapshot: try await harness.bake("v1"))
            let replica = try await Replica.open(configuration)
            let seen = Yields()
            let following = follow(replica, RecordQuery(items), into: seen)
            defer { following.cancel() }
            #expect(try await eventually { seen.count == 1 })
            let store = configuration.storeURL.path
            var (status, _) = try await runDeltasnap(["put", "--store", store, "--collection", items], input: #"{"id":"b","v":2}"#)
            #expect(status == 0)
            #expect(try await eventually(.seconds(30)) { seen.last == [#"{"id":"a","v":1}"#, #"{"id":"b","v":2}"#] })
            (status, _) = try await runDeltasnap(["delete", "--store", store, "--collection", items, "a"])
            #expect(status == 0)
            #expect(try await eventually(.seconds(30)) { seen.last == [#"{"id":"b","v":2}"#] })
            // Our own writes move data_version too: they may cost a re-read, never a repeated result.
            try await replica.put(try Record(parsing: Array(#"{"id":"c","v":3}"#.utf8)), in: items)
            #expect(try await eventually { seen.last?.count == 2 && seen.last?.last == #"{"id":"c","v":3}"# })
            try await Task.sleep(for: .seconds(2.5))
            #expect(seen.count == 4, "one result per change: \(seen.values.withLock { $0 })")
        }
    }

    @Test("during a sync (its pull stalled), an app's own put shows in a live query at once, not when the sync ends")
    func writeDuringSync() async throws {
        try await withHarness { harness in
            try await harness.put(#"{"id":"a","v":1}"#)
            let replica = try await Replica.open(harness.configuration(snapshot: try await harness.bake("v1"), viaProxy: true))
            let seen = Yields()
            let following = follow(replica, RecordQuery(items), into: seen)
            defer { following.cancel() }
            #expect(try await eventually { seen.count == 1 })
            harness.proxy.plan(.stall(.seconds(4)))
            let synced = Locked(false)
            let syncing = Task {
                _ = try await replica.sync()
                synced.withLock { $0 = true }
            }
            try await Task.sleep(for: .milliseconds(500))  // the sync holds the live queries' wake-ups now
            try await replica.put(try Record(parsing: Array(#"{"id":"b","v":2}"#.utf8)), in: items)
            #expect(try await eventually { seen.last == [#"{"id":"a","v":1}"#, #"{"id":"b","v":2}"#] })
            #expect(!synced.withLock { $0 }, "the put showed only once the sync had ended")
            try await syncing.value
        }
    }
}

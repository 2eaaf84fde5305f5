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
}

import DeltaClient
import DeltaCore
import DeltaSQLite
import DeltaSQLiteStore
import DeltaStore
import DeltaTestSupport
import Foundation
import Testing

/// Writes that never wedge (issue 37, defect 3): a write to a collection the server takes no
/// writes to is answered on its own (`denied`, rule `collection`), kept visible among
/// `rejected()`, discardable one by one, and the writes behind it go on.
@Suite("Rejected writes: answered one by one, kept visible, discarded one by one; the outbox never stops behind one")
struct ReplicaRejectedWriteTests {
    @Test("A user's write to a read-only collection is denied on its own; the note behind it is applied; the next write there fails at once")
    func userWriteToReadOnlyCollection() async throws {
        try await withUserHarness { harness in
            try await harness.put("airports", #"{"id":"p1","name":"Paris"}"#)
            try await harness.put("notes", #"{"id":"b1","owner":"bo","text":"his"}"#)
            let snapshot = try await harness.bake()
            let ada = try await UserHarness.token("ada")
            let replica = try await Replica.open(harness.configuration("ada", snapshot: snapshot, credentials: { ada }))
            try await replica.sync()
            // An edit the rules do not allow (airports are read-only), then a legitimate one.
            try await replica.put(try record(#"{"id":"p1","name":"Paris!"}"#), in: "airports")
            try await replica.put(try record(#"{"id":"n1","text":"mine"}"#), in: "notes")
            let report = try await replica.sync()
            #expect(report.pushed.applied == 1)
            #expect(report.pushed.conflicts.map(\.reason) == ["denied: collection"])
            #expect(report.pushError == nil)
            #expect(try await harness.store.record("n1", in: try CollectionName("notes")) != nil)
            #expect(try await replica.records("notes")["n1"] == #"{"id":"n1","owner":"ada","text":"mine"}"#)
            // Kept visible, with the local version: never dropped silently.
            let rejected = try await replica.rejected()
            #expect(rejected.map(\.id) == ["p1"])
            #expect(rejected.first?.server == nil)
            #expect(try await replica.state(of: "p1", in: "airports") == .conflicted)
            // The replica now knows: another write there fails at once, and nothing is queued.
            let refused = await #expect(throws: ReplicaError.self) { try await replica.put(try record(#"{"id":"p2"}"#), in: "airports") }
            #expect(refused?.kind == .refused)
            #expect(try await replica.state(of: "p2", in: "airports") == .synced)
            // Further writes elsewhere still go through.
            try await replica.put(try record(#"{"id":"n2","text":"more"}"#), in: "notes")
            #expect(try await replica.sync().pushed.applied == 1)
            // Discarded one by one: the server's copy shows again, nothing is left to settle.
            try await replica.discard(try #require(rejected.first))
            #expect(try await replica.rejected().isEmpty)
            #expect(try await replica.records("airports")["p1"] == #"{"id":"p1","name":"Paris"}"#)
            #expect(try await replica.state(of: "p1", in: "airports") == .synced)
            // A stale conflict (already discarded) is not discarded twice.
            let again = await #expect(throws: ReplicaError.self) { try await replica.discard(try #require(rejected.first)) }
            #expect(again?.kind == .configuration)
            // Nothing unsettled: the sign-out needs no discarding, and lifts the read-only mark.
            try await replica.signOut()
            try await replica.put(try record(#"{"id":"p3"}"#), in: "airports")
        }
    }

    @Test("The client key's push to a collection apps may not write: denied on its own (rule collection), the writable one applied")
    func clientKeyWriteToReadOnlyCollection() async throws {
        try await withUserHarness(appKey: "app-key-0123") { harness in
            try await harness.put("airports", #"{"id":"p1","name":"Paris"}"#)
            try await harness.put("notes", #"{"id":"b1","owner":"bo","text":"his"}"#)
            let snapshot = try await harness.bake()
            var configuration = harness.configuration("app", snapshot: snapshot, credentials: nil)
            configuration.clientKey = "app-key-0123"
            let replica = try await Replica.open(configuration)
            try await replica.put(try record(#"{"id":"p1","name":"Paris!"}"#), in: "airports")
            try await replica.put(try record(#"{"id":"n1","text":"anonymous"}"#), in: "notes")
            let report = try await replica.sync(pull: false)
            #expect(report.pushed.applied == 1)
            #expect(report.pushed.conflicts.map(\.reason) == ["denied: collection"])
            #expect(try await harness.store.record("n1", in: try CollectionName("notes")) != nil)
            #expect(try await harness.store.record("p1", in: try CollectionName("airports"))?.record.body == Array(#"{"id":"p1","name":"Paris"}"#.utf8))
            // A second push has nothing left to send: the denied write does not hold the queue.
            #expect(try await replica.sync(pull: false).pushed == PushSummary())
            let unsettled = await #expect(throws: ReplicaError.self) { try await replica.signOut() }
            #expect(
                unsettled?.description
                    == "configuration: cannot sign out: 1 denied write waits to be discarded or edited (discard, resolve); or sign out discarding them (0 queued, 0 conflicted, 1 denied)"
            )
        }
    }

    @Test("A collection learned read-only under the client key is writable again at the first sign-in: another principal, other rights")
    func readOnlyEndsAtSignIn() async throws {
        try await withUserHarness(appKey: "app-key-0123") { harness in
            try await harness.put("airports", #"{"id":"p1","name":"Paris"}"#)
            try await harness.put("notes", #"{"id":"b1","owner":"bo","text":"his"}"#)
            let snapshot = try await harness.bake()
            let signedIn = Locked<String?>(nil)
            var configuration = harness.configuration("app", snapshot: snapshot, credentials: { signedIn.withLock { $0 } })
            configuration.clientKey = "app-key-0123"
            let replica = try await Replica.open(configuration)
            try await replica.put(try record(#"{"id":"n0","text":"anonymous"}"#), in: "notes")
            _ = try await replica.sync(pull: false)
            try await replica.put(try record(#"{"id":"p1","name":"Paris!"}"#), in: "airports")
            #expect(try await replica.sync(pull: false).pushed.conflicts.map(\.reason) == ["denied: collection"])
            await #expect(throws: ReplicaError.self) { try await replica.put(try record(#"{"id":"p2"}"#), in: "airports") }
            // Keeping the refused write, or a merge of it, is refused as well: it could never go through.
            let kept = await #expect(throws: ReplicaError.self) { try await replica.resolve("p1", in: "airports", .keepLocal) }
            #expect(kept?.kind == .refused)
            try await replica.discard(try #require(try await replica.rejected().first))
            // Ada signs in: what she may write is hers to learn, not the client key's.
            let ada = try await UserHarness.token("ada")
            signedIn.withLock { $0 = ada }
            try await replica.sync()
            try await replica.put(try record(#"{"id":"p2"}"#), in: "airports")
            #expect(try await replica.state(of: "p2", in: "airports") == .pending)
        }
    }

    @Test("A misspelled collection is an error for reads, queries, searches and writes, never an empty answer")
    func unknownCollection() async throws {
        try await withUserHarness { harness in
            try await harness.put("airports", #"{"id":"p1","name":"Paris"}"#)
            try await harness.put("notes", #"{"id":"b1","owner":"bo","text":"his"}"#)
            let snapshot = try await harness.bake()
            let replica = try await Replica.open(harness.configuration("reader", snapshot: snapshot, credentials: nil))
            let message = #"configuration: no collection "airport" in this replica; its bundled snapshot holds airports, notes (airport)"#
            let reads: [@Sendable () async throws -> Void] = [
                { _ = try await replica.records(in: "airport") },
                { _ = try await replica.record("x", in: "airport") },
                { _ = try await replica.count(in: "airport") },
                { _ = try await replica.query("airport", filter: nil) },
                { _ = try await replica.entityTag(of: "airport") },
                { try await replica.put(try record(#"{"id":"x"}"#), in: "airport") },
                { try await replica.delete("x", in: "airport") },
            ]
            for read in reads {
                let error = await #expect(throws: ReplicaError.self) { try await read() }
                #expect(error?.description == message)
            }
            #expect(try await replica.records(in: "airports").count == 1)
        }
    }
}

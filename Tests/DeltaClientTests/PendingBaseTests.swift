import DeltaClient
import DeltaCore
import DeltaSQLite
import DeltaTestSupport
import Foundation
import Testing

/// A record the app has edited shows its local version until a pull confirms the edit; a pull in
/// between may bring the server's newer copy into the store without the app ever seeing it. A
/// further edit must then say it was made on top of the server copy the app last saw, not on top
/// of whatever the collection's newest ETag is.
@Suite("The base of an edit on top of a pending one")
struct PendingBaseTests {
    @Test("an edit on top of an unconfirmed one carries the base the app last saw: a server change pulled in between is a conflict, never overwritten")
    func editOnTopOfUnsentEdit() async throws {
        try await withHarness { harness in
            try await harness.put(#"{"id":"a","n":1}"#)
            let replica = try await Replica.open(harness.configuration(snapshot: try await harness.bake("v1"), viaProxy: true))
            try await replica.put(try record(#"{"id":"a","n":2}"#), in: items)
            // The push never reaches the server; the pull that follows brings another writer's
            // change to the record, which the app does not see (its own edit shows).
            try await harness.put(#"{"id":"a","n":5}"#)
            harness.proxy.plan(.status(503, retryAfter: nil))
            let failed = await #expect(throws: ReplicaError.self) { try await replica.sync() }
            #expect(failed?.kind == .serverUnavailable)
            await #expect(try replica.contents() == ["a": #"{"id":"a","n":2}"#])
            // The first edit was sent, so this one is a mutation of its own.
            try await replica.put(try record(#"{"id":"a","n":3}"#), in: items)
            let report = try await replica.sync()
            #expect(report.pushed.applied == 0)
            #expect(report.pushed.conflicts.map(\.id) == ["a"])
            let conflict = try await #require(try replica.conflicts().first)
            #expect(conflict.server?.body == Array(#"{"id":"a","n":5}"#.utf8))
            #expect(conflict.local?.body == Array(#"{"id":"a","n":3}"#.utf8))
            #expect(try await harness.serverRecords() == ["a": #"{"id":"a","n":5}"#])
            // Keeping the local version sends it on top of the server's copy the conflict showed.
            try await replica.resolve("a", in: items, .keepLocal)
            try await replica.put(try record(#"{"id":"a","n":4}"#), in: items)
            let resolved = try await replica.sync()
            #expect(resolved.pushed.conflicts.isEmpty)
            #expect(try await harness.serverRecords() == ["a": #"{"id":"a","n":4}"#])
            await #expect(try replica.state(of: "a", in: items) == .synced)
        }
    }

    @Test("an edit on top of an applied but unconfirmed one is not a conflict with itself")
    func editOnTopOfAppliedEdit() async throws {
        try await withHarness { harness in
            try await harness.put(#"{"id":"a","n":1}"#)
            let replica = try await Replica.open(harness.configuration(snapshot: try await harness.bake("v1"), viaProxy: true))
            try await replica.put(try record(#"{"id":"a","n":2}"#), in: items)
            // Pushed, not pulled: the edit waits for a pull to confirm it.
            #expect(try await replica.sync(pull: false).pushed.applied == 1)
            await #expect(try replica.state(of: "a", in: items) == .pending)
            try await replica.put(try record(#"{"id":"a","n":3}"#), in: items)
            let report = try await replica.sync()
            #expect(report.pushed.applied == 1)
            #expect(report.pushed.conflicts.isEmpty)
            await #expect(try replica.state(of: "a", in: items) == .synced)
            #expect(try await harness.serverRecords() == ["a": #"{"id":"a","n":3}"#])
        }
    }

    @Test("an outbox from before edits kept their base opens, keeps its pending edit, and pushes it")
    func outboxWithoutBaseColumn() async throws {
        try await withHarness { harness in
            try await harness.put(#"{"id":"a","n":1}"#)
            let configuration = harness.configuration(snapshot: try await harness.bake("v1"), viaProxy: true)
            do {
                let replica = try await Replica.open(configuration)
                try await replica.put(try record(#"{"id":"a","n":2}"#), in: items)
            }
            // Rebuild the overlay as the earlier schema had it: without `base`.
            let outbox = try Connection(path: ReplicaFiles.outboxURL(forStore: configuration.storeURL).path, mode: .readWrite)
            try outbox.execute(
                """
                CREATE TABLE old_overlay(collection TEXT NOT NULL, id TEXT NOT NULL, hidden INTEGER NOT NULL, body TEXT NOT NULL,
                    PRIMARY KEY (collection, id)) WITHOUT ROWID;
                INSERT INTO old_overlay SELECT collection, id, hidden, body FROM overlay;
                DROP TABLE overlay; ALTER TABLE old_overlay RENAME TO overlay;
                """)
            #expect(try outbox.integer("SELECT count(*) FROM pragma_table_info('overlay') WHERE name = 'base'") == 0)
            let replica = try await Replica.open(configuration)
            #expect(try outbox.integer("SELECT count(*) FROM pragma_table_info('overlay') WHERE name = 'base'") == 1)
            await #expect(try replica.contents() == ["a": #"{"id":"a","n":2}"#])
            try await replica.put(try record(#"{"id":"a","n":3}"#), in: items)
            #expect(try await replica.sync().pushed.applied == 1)
            #expect(try await harness.serverRecords() == ["a": #"{"id":"a","n":3}"#])
        }
    }
}

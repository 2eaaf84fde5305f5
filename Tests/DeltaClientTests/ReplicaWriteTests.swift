import DeltaClient
import DeltaCore
import DeltaSQLite
import DeltaStore
import DeltaTestSupport
import Foundation
import Testing

/// A record from JSON text.
func record(_ json: String) throws -> Record { try Record(parsing: Array(json.utf8)) }

@Suite("Replica writes: offline edits, push then pull, conflicts, nothing lost")
struct ReplicaWriteTests {
    @Test("offline edits show at once as pending; a sync pushes them once, then they are synced and equal the server")
    func offlineEditThenSync() async throws {
        try await withHarness { harness in
            try await harness.put(#"{"id":"a","n":1}"#, #"{"id":"b","n":2}"#)
            var configuration = harness.configuration(snapshot: try await harness.bake("v1"), viaProxy: true)
            configuration.pushURL = URL(string: "http://127.0.0.1:9/push")  // nothing listens: offline
            configuration.serverURL = URL(string: "http://127.0.0.1:9/api")!
            let offline = try await Replica.open(configuration)
            try await offline.put(try record(#"{"id":"c","n":3}"#), in: items)
            try await offline.put(try record(#"{"id":"a","n":10}"#), in: items)
            try await offline.delete("b", in: items)
            await #expect(try offline.contents() == ["a": #"{"id":"a","n":10}"#, "c": #"{"id":"c","n":3}"#])
            await #expect(try offline.count(in: items) == 2)
            await #expect(try offline.record("b", in: items) == nil)
            await #expect(try offline.state(of: "a", in: items) == .pending)
            await #expect(try offline.state(of: "zz", in: items) == .synced)
            let failure = await #expect(throws: ReplicaError.self) { try await offline.sync() }
            #expect(failure?.isTransient == true)
            await #expect(try offline.contents().count == 2)

            // Back online: the same store, the real server; batches of two, so the queue goes in two pushes.
            var online = harness.configuration(snapshot: configuration.snapshotURL, viaProxy: true)
            online.pushBatchSize = 2
            let replica = try await Replica.open(online)
            await #expect(try replica.contents() == ["a": #"{"id":"a","n":10}"#, "c": #"{"id":"c","n":3}"#])
            for id in ["d", "e", "f"] { try await replica.put(try record(#"{"id":"\#(id)"}"#), in: items) }
            let report = try await replica.sync()
            #expect(report.pushError == nil)
            #expect(report.pushed.applied == 6)
            #expect(report.pushed.conflicts.isEmpty)
            #expect(try await harness.serverRecords() == replica.contents())
            await #expect(try replica.state(of: "a", in: items) == .synced)
            await #expect(try replica.state(of: "b", in: items) == .synced)
            // The pull after the push named the client, to learn which writes it holds; with nothing
            // left to confirm, the next pull is a plain conditional GET (the server's fastest path).
            #expect(harness.proxy.requests.last?.deltaClient == replica.clientID)
            let second = try await replica.sync()
            #expect(second.pushed == PushSummary())
            #expect(harness.proxy.pushes == 3)
            #expect(harness.proxy.requests.last?.deltaClient == nil)
        }
    }

    @Test("queued edits collapse: create+edit is one create, create+delete sends nothing, edit+delete is a delete")
    func collapsing() async throws {
        try await withHarness { harness in
            try await harness.put(#"{"id":"a","n":1}"#)
            let replica = try await Replica.open(harness.configuration(snapshot: try await harness.bake("v1"), viaProxy: true))
            try await replica.put(try record(#"{"id":"tmp"}"#), in: items)
            try await replica.delete("tmp", in: items)
            await #expect(try replica.state(of: "tmp", in: items) == .synced)
            _ = try await replica.sync()
            #expect(harness.proxy.pushes == 0)
            try await replica.put(try record(#"{"id":"new","v":1}"#), in: items)
            try await replica.put(try record(#"{"id":"new","v":2}"#), in: items)
            try await replica.put(try record(#"{"id":"a","n":2}"#), in: items)
            try await replica.delete("a", in: items)
            let report = try await replica.sync()
            #expect(report.pushed.applied == 2)
            #expect(try await harness.serverRecords() == ["new": #"{"id":"new","v":2}"#])
            await #expect(try replica.contents() == ["new": #"{"id":"new","v":2}"#])
        }
    }

    @Test("two clients edit one record: the second gets a conflict with both versions; keep server, keep local and merged each settle it")
    func conflictsAndResolutions() async throws {
        try await withHarness { harness in
            try await harness.put(#"{"id":"a","n":1}"#, #"{"id":"b","n":1}"#, #"{"id":"c","n":1}"#, #"{"id":"d","n":1}"#)
            let snapshot = try await harness.bake("v1")
            let one = try await Replica.open(harness.configuration("one", snapshot: snapshot))
            let two = try await Replica.open(harness.configuration("two", snapshot: snapshot))
            let events = two.events()
            for id in ["a", "b", "c"] { try await one.put(try record(#"{"id":"\#(id)","n":2,"by":"one"}"#), in: items) }
            try await one.delete("d", in: items)
            _ = try await one.sync()
            for id in ["a", "b", "c"] { try await two.put(try record(#"{"id":"\#(id)","n":3,"by":"two"}"#), in: items) }
            try await two.put(try record(#"{"id":"d","n":3,"by":"two"}"#), in: items)
            try await two.put(try record(#"{"id":"e","n":3}"#), in: items)
            let report = try await two.sync()
            #expect(report.pushed.applied == 1)
            #expect(report.pushed.conflicts.map(\.id) == ["a", "b", "c", "d"])
            #expect(report.pushed.conflicts.map(\.reason) == ["changed", "changed", "changed", "hidden"])
            var iterator = events.makeAsyncIterator()
            var announced: [String] = []
            while announced.count < 4, let event = await iterator.next() { if case .conflict(let conflict) = event { announced.append(conflict.id) } }
            #expect(announced == ["a", "b", "c", "d"])
            let a = try await #require(try two.conflicts().first { $0.id == "a" })
            #expect(a.server?.body == Array(#"{"by":"one","id":"a","n":2}"#.utf8))
            #expect(a.local?.body == Array(#"{"by":"two","id":"a","n":3}"#.utf8))
            await #expect(try two.state(of: "a", in: items) == .conflicted)
            // The server kept one's writes: nothing was overwritten silently.
            #expect(try await harness.serverRecords()["a"] == #"{"by":"one","id":"a","n":2}"#)
            // The app still sees its own version until it resolves.
            await #expect(try two.record("a", in: items)?.body == a.local?.body)
            try await two.resolve("a", in: items, .keepServer)
            try await two.resolve("b", in: items, .keepLocal)
            // A merge must keep the record's id: one for another record is refused, and the conflict stays.
            await #expect(throws: ReplicaError.self) { try await two.resolve("c", in: items, .merged(try record(#"{"id":"C","n":5}"#))) }
            await #expect(try two.state(of: "c", in: items) == .conflicted)
            try await two.resolve("c", in: items, .merged(try record(#"{"id":"c","n":5,"by":"both"}"#)))
            try await two.resolve("d", in: items, .keepLocal)
            await #expect(try two.record("a", in: items)?.body == Array(#"{"by":"one","id":"a","n":2}"#.utf8))
            let resolved = try await two.sync()
            #expect(resolved.pushed.applied == 3)
            await #expect(try two.conflicts().isEmpty)
            let server = try await harness.serverRecords()
            #expect(server["a"] == #"{"by":"one","id":"a","n":2}"#)
            #expect(server["b"] == #"{"by":"two","id":"b","n":3}"#)
            #expect(server["c"] == #"{"by":"both","id":"c","n":5}"#)
            #expect(server["d"] == #"{"by":"two","id":"d","n":3}"#)
            await #expect(try two.contents() == server)
            _ = try await one.sync()
            await #expect(try one.contents() == server)
            for id in ["a", "b", "c", "d", "e"] { await #expect(try two.state(of: id, in: items) == .synced) }
        }
    }

    @Test("a delete over a newer server edit and a create over an existing id are conflicts with their reasons")
    func deleteVersusEditAndCreateOverExisting() async throws {
        try await withHarness { harness in
            try await harness.put(#"{"id":"a","n":1}"#)
            let replica = try await Replica.open(harness.configuration(snapshot: try await harness.bake("v1")))
            try await harness.put(#"{"id":"a","n":2}"#, #"{"id":"x","n":1}"#)
            try await replica.delete("a", in: items)
            try await replica.put(try record(#"{"id":"x","mine":true}"#), in: items)
            let report = try await replica.sync()
            #expect(report.pushed.conflicts.map(\.reason) == ["changed", "exists"])
            #expect(report.pushed.conflicts.first?.local?.hidden == true)
            #expect(try await harness.serverRecords() == ["a": #"{"id":"a","n":2}"#, "x": #"{"id":"x","n":1}"#])
            await #expect(try replica.record("a", in: items) == nil)
        }
    }

    @Test("pending edits survive resets and a rebuilt corrupt store, and are pushed after")
    func survivesResetsAndRebuilds() async throws {
        try await withHarness { harness in
            try await harness.put(#"{"id":"a","n":1}"#, #"{"id":"b","n":1}"#)
            let configuration = harness.configuration(snapshot: try await harness.bake("v1"), viaProxy: true)
            do {
                let replica = try await Replica.open(configuration)
                try await replica.put(try record(#"{"id":"a","n":9}"#), in: items)
                try await replica.delete("b", in: items)
                try await harness.put(#"{"id":"c","n":1}"#)
                // The push finds the server unavailable; the pull's delta claims another base:
                // the collection resets to the snapshot and syncs again, the edits untouched.
                harness.proxy.plan(.status(503, retryAfter: nil), .otherBase)
                let failed = await #expect(throws: ReplicaError.self) { try await replica.sync() }
                #expect(failed?.kind == .serverUnavailable)
                await #expect(try replica.contents() == ["a": #"{"id":"a","n":9}"#, "c": #"{"id":"c","n":1}"#])
            }
            // Corrupt the store's file: the next open rebuilds it from the snapshot; the outbox is a file of its own.
            let path = configuration.storeURL.path
            let handle = try #require(FileHandle(forWritingAtPath: path))
            try handle.seek(toOffset: 0)
            handle.write(Data(repeating: 0x42, count: 4096))
            try handle.close()
            // The write-ahead log, kept between launches, may still hold good copies of those
            // pages (which would mask, and later repair, the damage): it goes too.
            try? FileManager.default.removeItem(atPath: path + "-wal")
            try? FileManager.default.removeItem(atPath: path + "-shm")
            let rebuilt = try await Replica.open(configuration)
            #expect(rebuilt.openReport.rebuilt != nil)
            await #expect(try rebuilt.record("a", in: items)?.body == Array(#"{"id":"a","n":9}"#.utf8))
            await #expect(try rebuilt.record("b", in: items) == nil)
            let report = try await rebuilt.sync()
            #expect(report.pushed.applied == 2)
            #expect(try await harness.serverRecords() == ["a": #"{"id":"a","n":9}"#, "c": #"{"id":"c","n":1}"#])
            #expect(try await rebuilt.contents() == harness.serverRecords())
        }
    }

    @Test("a server rebuilt as another database: the push numbers again, stale bases are conflicts, the pull resets; no edit is lost")
    func foreignDatabase() async throws {
        try await withHarness { first in
            try await first.put(#"{"id":"a","n":1}"#, #"{"id":"b","n":1}"#)
            let snapshot = try await first.bake("v1")
            let configuration = first.configuration(snapshot: snapshot)
            do {
                let replica = try await Replica.open(configuration)
                try await replica.put(try record(#"{"id":"a","n":2}"#), in: items)
                #expect(try await replica.sync().pushed.applied == 1)
                try await replica.put(try record(#"{"id":"a","n":3}"#), in: items)
                try await replica.put(try record(#"{"id":"c","n":1}"#), in: items)
                try await replica.delete("b", in: items)
            }
            try await withHarness { second in
                try await second.put(#"{"id":"a","n":1}"#, #"{"id":"b","n":1}"#)
                var moved = configuration
                moved.serverURL = second.apiURL()
                let replica = try await Replica.open(moved)
                let events = replica.events()
                let report = try await replica.sync()
                #expect(report.pushError == nil)
                #expect(report.pushed.applied == 1)
                #expect(report.pushed.conflicts.map(\.id) == ["a", "b"])
                #expect(report.pushed.conflicts.map(\.reason) == ["unknown-base", "unknown-base"])
                #expect(report.collections.first?.reset == .serverSignal("foreign-database"))
                await #expect(try replica.contents() == ["a": #"{"id":"a","n":3}"#, "c": #"{"id":"c","n":1}"#])
                var iterator = events.makeAsyncIterator()
                var resets = 0
                while let event = await iterator.next() {
                    if case .reset = event { resets += 1 }
                    if case .finished = event { break }
                }
                #expect(resets == 1)
                try await replica.resolve("a", in: items, .keepLocal)
                try await replica.resolve("b", in: items, .keepLocal)
                #expect(try await replica.sync().pushed.applied == 2)
                #expect(try await second.serverRecords() == ["a": #"{"id":"a","n":3}"#, "c": #"{"id":"c","n":1}"#])
                #expect(try await replica.contents() == second.serverRecords())
            }
        }
    }
}

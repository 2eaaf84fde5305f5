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

@Suite("Replica: install, deltas, hidden records, 304")
struct ReplicaSyncTests {
    @Test("first open installs the snapshot; syncs apply upserts, hides and un-hides, then 304; the client sends both validators and accepts gzip")
    func installAndSync() async throws {
        try await withHarness { harness in
            try await harness.put(#"{"id":"a","n":1}"#, #"{"id":"b","n":2}"#, #"{"id":"c","n":3}"#)
            let snapshot = try await harness.bake("v1")
            let replica = try await Replica.open(harness.configuration(snapshot: snapshot, viaProxy: true))
            #expect(replica.openReport == OpenReport(installed: [items], rebuilt: nil))
            #expect(replica.collections == [items])
            #expect(try await replica.contents() == harness.serverRecords())
            let installedTag = try await #require(try replica.entityTag(of: items))

            var report = try await replica.sync()
            #expect(report.collections == [CollectionSync(collection: items, outcome: .notModified, reset: nil, entityTag: installedTag)])
            let first = try #require(harness.proxy.requests.last)
            #expect(first.ifNoneMatch == installedTag)
            #expect(first.ifModifiedSince == "Thu, 01 Jan 1970 00:00:01 GMT")
            #expect(first.acceptEncoding?.contains("gzip") == true)

            try await harness.put(#"{"id":"b","n":20}"#, #"{"id":"d","n":4}"#)
            report = try await replica.sync()
            #expect(report.collections.first?.outcome == .applied(upserted: 2, hidden: 0))
            #expect(report.changedData)
            #expect(try await replica.contents() == harness.serverRecords())
            await #expect(try replica.record("b", in: items)?.body == Array(#"{"id":"b","n":20}"#.utf8))

            try await harness.hide("a")
            report = try await replica.sync()
            #expect(report.collections.first?.outcome == .applied(upserted: 0, hidden: 1))
            await #expect(try replica.record("a", in: items) == nil)
            await #expect(try replica.count(in: items) == 3)

            try await harness.put(#"{"id":"a","n":1}"#)
            report = try await replica.sync()
            #expect(report.collections.first?.outcome == .applied(upserted: 1, hidden: 0))
            await #expect(try replica.record("a", in: items)?.body == Array(#"{"id":"a","n":1}"#.utf8))
            #expect(try await replica.contents() == harness.serverRecords())

            report = try await replica.sync()
            #expect(report.collections.first?.outcome == .notModified)
            #expect(!report.changedData)
            #expect(harness.proxy.requests.last?.ifNoneMatch == report.collections.first?.entityTag)
        }
    }

    @Test("a 304 that repeats an older token than the one sent (other collections changed since) stores it")
    func notModifiedStoresRepeatedToken() async throws {
        try await withHarness { harness in
            try await harness.put(#"{"id":"a"}"#)
            let configuration = harness.configuration(snapshot: try await harness.bake("v1"))
            let itemsTag = try #require(try await harness.serverETag())
            _ = try await harness.store.write(to: try CollectionName("other")) { try await $0.upsert(try Record(parsing: Array(#"{"id":"x"}"#.utf8))) }
            var request = URLRequest(url: harness.apiURL().appendingPathComponent("other"))
            request.cachePolicy = .reloadIgnoringLocalCacheData
            let (_, response) = try await URLSession.shared.data(for: request)
            let http = try #require(response as? HTTPURLResponse)
            let otherTag = try #require(http.value(forHTTPHeaderField: "ETag"))
            let otherDate = try #require(http.value(forHTTPHeaderField: "Last-Modified"))
            let replica = try await Replica.open(configuration)
            try Connection(path: configuration.storeURL.path).statement("UPDATE collections SET etag = ?, last_modified = ?").run(
                .text(otherTag), .text(otherDate))
            let report = try await replica.sync()
            #expect(report.collections.first?.outcome == .notModified)
            #expect(report.collections.first?.entityTag == itemsTag)
            await #expect(try replica.entityTag(of: items) == itemsTag)
        }
    }

    @Test("records decode into the app's own types")
    func decoding() async throws {
        struct Item: Decodable, Equatable {
            let id: String
            let n: Int
        }
        try await withHarness { harness in
            try await harness.put(#"{"id":"a","n":1}"#)
            let replica = try await Replica.open(harness.configuration(snapshot: try await harness.bake("v1")))
            await #expect(try replica.record("a", in: items, as: Item.self) == Item(id: "a", n: 1))
            await #expect(try replica.record("zz", in: items, as: Item.self) == nil)
        }
    }

    @Test("a full answer to a conditional request (a cache dropped the validators) replaces the collection: a record hidden meanwhile goes away")
    func fullAnswerReplaces() async throws {
        try await withHarness { harness in
            try await harness.put(#"{"id":"a"}"#, #"{"id":"b"}"#, #"{"id":"c"}"#)
            let replica = try await Replica.open(harness.configuration(snapshot: try await harness.bake("v1"), viaProxy: true))
            try await harness.hide("b")
            try await harness.put(#"{"id":"d"}"#)
            harness.proxy.plan(.dropValidators)
            let report = try await replica.sync()
            #expect(report.collections.first?.outcome == .replaced(records: 3))
            #expect(report.collections.first?.reset == nil)
            #expect(try await replica.contents() == harness.serverRecords())
            await #expect(try replica.record("b", in: items) == nil)
        }
    }

    @Test("concurrent syncs join the running one: one request, one report")
    func concurrentSyncsJoin() async throws {
        try await withHarness { harness in
            try await harness.put(#"{"id":"a"}"#)
            let replica = try await Replica.open(harness.configuration(snapshot: try await harness.bake("v1"), viaProxy: true))
            try await harness.put(#"{"id":"b"}"#)
            async let one = replica.sync()
            async let two = replica.sync()
            let (first, second) = try await (one, two)
            #expect(first == second)
            #expect(harness.proxy.requests.count == 1)
            #expect(try await replica.syncIfNeeded(minimumInterval: 3600) == nil)
            #expect(harness.proxy.requests.count == 1)
            #expect(try await replica.syncIfNeeded(minimumInterval: 0)?.collections.first?.outcome == .notModified)
            #expect(harness.proxy.requests.count == 2)
        }
    }

    @Test("a cancelled sync sends nothing or rolls back: the store is the state before or after, and the next sync completes")
    func cancellation() async throws {
        try await withHarness { harness in
            try await harness.put(#"{"id":"a"}"#)
            let replica = try await Replica.open(harness.configuration(snapshot: try await harness.bake("v1"), viaProxy: true))
            let before = try await replica.contents()
            _ = try await harness.store.write(to: try CollectionName(items)) { transaction in
                for index in 0..<20_000 { try await transaction.upsert(try Record(parsing: Array(#"{"id":"r\#(index)"}"#.utf8))) }
            }
            let cancelledAtOnce = Task {
                withUnsafeCurrentTask { $0?.cancel() }
                return try await replica.sync()
            }
            await #expect(throws: CancellationError.self) { try await cancelledAtOnce.value }
            #expect(harness.proxy.requests.isEmpty)
            await #expect(try replica.contents() == before)
            let after = try await harness.serverRecords()
            for delay in [1, 5, 20, 60] {
                let running = Task { try await replica.sync() }
                try await Task.sleep(for: .milliseconds(delay))
                running.cancel()
                _ = await running.result
                let state = try await replica.contents()
                #expect(state == before || state == after, "cancelled after \(delay) ms: \(state.count) records")
                if state == after { break }
            }
            _ = try await replica.sync()
            await #expect(try replica.contents() == after)
        }
    }

    @Test("events report started, reset and finished in order")
    func events() async throws {
        try await withHarness { harness in
            try await harness.put(#"{"id":"a"}"#)
            let replica = try await Replica.open(harness.configuration(snapshot: try await harness.bake("v1"), viaProxy: true))
            let events = replica.events()
            try await harness.put(#"{"id":"b"}"#)
            harness.proxy.plan(.truncate)
            let report = try await replica.sync()
            var seen: [SyncEvent] = []
            for await event in events {
                seen.append(event)
                if case .finished = event { break }
            }
            #expect(seen.count == 3)
            #expect(seen.first == .started)
            guard case .reset(items, .undecodableBody) = seen[1] else {
                Issue.record("expected a reset event, got \(seen[1])")
                return
            }
            #expect(seen.last == .finished(report))
        }
    }
}

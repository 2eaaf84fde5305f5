import DeltaClient
import DeltaCore
import DeltaTestSupport
import Foundation
import Testing

/// The model the typed tests use.
struct Item: Codable, Sendable, Identifiable, Equatable {
    var id: String
    var v: Int
    var g: String
}

@Suite("Typed collections, LiveQuery and SyncStatus")
struct TypedCollectionTests {
    @Test("get, query (filter, several sort keys, limit, offset), count, put, delete round-trip; a record that does not decode is skipped and reported")
    func roundTrip() async throws {
        try await withHarness { harness in
            try await harness.put(#"{"g":"a","id":"r1","v":2}"#, #"{"g":"b","id":"r2","v":1}"#, #"{"g":"x","id":"bad","v":"not a number"}"#)
            let replica = try await Replica.open(harness.configuration(snapshot: try await harness.bake("v1")))
            let collection = replica.collection(Item.self, named: items)
            let events = replica.events()
            try await collection.put([Item(id: "r3", v: 2, g: "b"), Item(id: "r4", v: 1, g: "a")])
            #expect(try await collection.get("r3") == Item(id: "r3", v: 2, g: "b"))
            #expect(try await collection.get("nope") == nil)
            let error = await #expect(throws: ReplicaError.self) { try await collection.get("bad") }
            #expect(error?.kind == .decoding)
            #expect(error?.description.hasPrefix("decoding: the record does not decode as Item (items/bad: ") == true)

            let all = try await collection.query(order: [.descending("v"), .ascending("g")])
            #expect(all.items.map(\.id) == ["r1", "r3", "r4", "r2"])
            #expect(all.skipped.map(\.id) == ["bad"])
            #expect(all.next == nil)
            var iterator = events.makeAsyncIterator()
            #expect(await iterator.next() == .undecodable(collection: items, id: "bad", reason: all.skipped[0].reason))

            let page = try await collection.query(
                filter: try Filter(parsing: #"{"v":{"lte":2}}"#), order: [.ascending("v"), .descending("id")], limit: 2, offset: 1)
            #expect(page.items.map(\.id) == ["r2", "r3"])
            #expect(page.next != nil)
            #expect(try await collection.count() == 5)
            #expect(try await collection.count(filter: try Filter(parsing: #"{"g":{"eq":"a"}}"#)) == 2)

            try await collection.delete("r1")
            #expect(try await collection.get("r1") == nil)
            #expect(try await collection.count() == 4)
            _ = try await replica.sync()
            #expect(try await harness.serverRecords()["r3"] == #"{"g":"b","id":"r3","v":2}"#)
            #expect(try await harness.serverRecords()["r1"] == nil)
        }
    }

    @Test("A large result decodes in parts at once and joins in order: 1,500 models by id, a bad record in the middle skipped, the next page's cursor")
    func largeResultInParts() async throws {
        try await withHarness { harness in
            let records = (0..<1_501).map { index in
                index == 700 ? #"{"g":"a","id":"r0700","v":"bad"}"# : #"{"g":"a","id":"r\#(String(format: "%04d", index))","v":\#(index)}"#
            }
            try await harness.putMany(records)
            let replica = try await Replica.open(harness.configuration(snapshot: try await harness.bake("v1")))
            let collection = replica.collection(Item.self, named: items)
            let page = try await collection.query(order: [.ascending("id")], limit: 1_500)
            #expect(page.items.count == 1_499)
            #expect(page.items.map(\.v) == Array(0..<700) + Array(701..<1_500))
            #expect(page.skipped.map(\.id) == ["r0700"])
            #expect(page.next != nil)
            let rest = try await collection.query(order: [.ascending("id")], limit: 1_500, after: page.next)
            #expect(rest.items.map(\.id) == ["r1500"] && rest.next == nil)
        }
    }

    @Test("A burst of 300 puts, 50 at a time: the status counts 300 pending writes at the end, and no older count lands after it")
    func burstOfPuts() async throws {
        try await withHarness { harness in
            try await harness.put(#"{"g":"a","id":"r1","v":1}"#)
            let replica = try await Replica.open(harness.configuration(snapshot: try await harness.bake("v1")))
            let collection = replica.collection(Item.self, named: items)
            for batch in 0..<6 {
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for index in batch * 50..<(batch + 1) * 50 { group.addTask { try await collection.put(Item(id: "n\(index)", v: index, g: "b")) } }
                    try await group.waitForAll()
                }
            }
            #expect(try await eventually { replica.syncState.pendingWrites == 300 }, "pending: \(replica.syncState.pendingWrites)")
            try await Task.sleep(for: .milliseconds(200))
            #expect(replica.syncState.pendingWrites == 300)
        }
    }

    @Test("A cursor pages through while records are added and removed before it: no record seen twice, none that stayed missed")
    func cursorStable() async throws {
        try await withHarness { harness in
            try await harness.putMany((0..<20).map { #"{"g":"a","id":"r\#(String(format: "%02d", $0))","v":\#($0 % 4)}"# })
            let replica = try await Replica.open(harness.configuration(snapshot: try await harness.bake("v1")))
            let collection = replica.collection(Item.self, named: items)
            var seen: [String] = []
            var cursor: RecordQuery.Cursor?
            var round = 0
            repeat {
                let page = try await collection.query(order: [.ascending("v")], limit: 3, after: cursor)
                seen += page.items.map(\.id)
                cursor = page.next
                // Meanwhile: a new record sorts before the cursor, and one already seen goes.
                try await collection.put(Item(id: "new\(round)", v: 0, g: "b"))
                if let first = seen.first { try await collection.delete(first) }
                round += 1
            } while cursor != nil
            #expect(Set(seen).count == seen.count, "a record came twice: \(seen)")
            #expect(Set(seen).isSuperset(of: (0..<20).map { String(format: "r%02d", $0) }), "a record was missed: \(seen)")
            #expect(seen.filter { $0.hasPrefix("new") }.isEmpty, "records added before the cursor are not in later pages: \(seen)")
        }
    }

    @available(macOS 14, iOS 17, tvOS 17, watchOS 10, visionOS 1, *)
    @Test(
        "LiveQuery and a typed observe follow puts and deletes; SyncStatus counts pending writes, shows the last sync, the back-off and its error; force ignores the back-off"
    )
    func observable() async throws {
        try await withHarness { harness in
            try await harness.put(#"{"g":"a","id":"r1","v":1}"#, #"{"g":"a","id":"bad","v":"x"}"#)
            let replica = try await Replica.open(harness.configuration(snapshot: try await harness.bake("v1"), viaProxy: true))
            let collection = replica.collection(Item.self, named: items)
            let live = await MainActor.run { LiveQuery(collection, order: [.ascending("id")]) }
            #expect(try await eventually { await MainActor.run { live.isLoaded } })
            await MainActor.run {
                #expect(live.elements == [Item(id: "r1", v: 1, g: "a")])
                #expect(live.skipped == 1)
            }
            let status = await MainActor.run { replica.status }
            await MainActor.run {
                #expect(status.pendingWrites == 0 && status.lastSyncDate == nil && status.phase == .idle)
            }

            try await collection.put(Item(id: "r2", v: 5, g: "b"))
            #expect(try await eventually { await MainActor.run { live.elements.map(\.id) == ["r1", "r2"] && status.pendingWrites == 1 } })
            _ = try await replica.sync()
            #expect(try await eventually { await MainActor.run { status.pendingWrites == 0 && status.lastSyncDate != nil } })

            harness.proxy.plan(.status(503, retryAfter: "120"))
            await #expect(throws: ReplicaError.self) { try await replica.sync() }
            #expect(try await eventually { await MainActor.run { status.lastError?.kind == .serverUnavailable } })
            await MainActor.run {
                guard case .backingOff(let until) = status.phase else {
                    Issue.record("phase \(status.phase)")
                    return
                }
                #expect(until.timeIntervalSinceNow > 100)
            }
            let waiting = await #expect(throws: ReplicaError.self) { try await replica.sync() }
            #expect(waiting?.kind == .backingOff)
            try await harness.put(#"{"g":"b","id":"r3","v":3}"#)
            _ = try await replica.sync(force: true)
            #expect(try await eventually { await MainActor.run { status.phase == .idle && status.lastError == nil } })
            #expect(try await eventually { await MainActor.run { live.elements.map(\.id) == ["r1", "r2", "r3"] } })
            #expect(replica.syncState.phase == .idle && replica.lastSyncDate != nil)

            try await collection.delete("r1")
            #expect(try await eventually { await MainActor.run { live.elements.map(\.id) == ["r2", "r3"] } })
        }
    }
}

import DeltaClient
import DeltaCore
import DeltaSQLite
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

/// `Item`, counting how many times one was decoded.
struct CountedItem: Codable, Sendable, Identifiable, Equatable {
    static let decoded = Locked(0)
    var id: String
    var v: Int
    var g: String

    init(id: String, v: Int, g: String) { (self.id, self.v, self.g) = (id, v, g) }

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        (id, v, g) = (try container.decode(String.self, forKey: .id), try container.decode(Int.self, forKey: .v), try container.decode(String.self, forKey: .g))
        Self.decoded.withLock { $0 += 1 }
    }
}

@Suite("Typed live queries decode only what changed", .serialized)
struct TypedLiveQueryTests {
    @Test(
        "A typed live query keeps the models of records whose bytes did not change: one put decodes one model; random puts, moves, deletes, undecodable records and deltas end as the typed query run fresh"
    )
    func keepsUnchangedModels() async throws {
        let seed = SeededGenerator.seed(for: "TypedLiveQueryTests.keepsUnchangedModels")
        // Each patched (by id, and under a filter) or read whole (a limit reached).
        let queries: [(filter: Filter?, order: [RecordQuery.SortKey], limit: Int?)] = [
            (nil, [.ascending("v")], nil), (try Filter(parsing: #"{"g":{"eq":"a"}}"#), [.descending("v")], nil), (nil, [], 40),
        ]
        try await withHarness { harness in
            var random = SeededGenerator(seed: seed)
            func body(_ id: Int) -> String { #"{"g":"\#(random.next() % 2 == 0 ? "a" : "b")","id":"r\#(id)","v":\#(random.next() % 50)}"# }
            try await harness.putMany((0..<300).map { body($0) })
            let replica = try await Replica.open(harness.configuration(snapshot: try await harness.bake("v1")))
            let collection = replica.collection(CountedItem.self, named: items)
            let last = queries.map { _ in Locked<TypedResult<CountedItem>?>(nil) }
            let followers = zip(queries, last).map { query, last in
                Task {
                    for try await result in collection.observe(filter: query.filter, order: query.order, limit: query.limit) {
                        last.withLock { $0 = result }
                    }
                }
            }
            defer { for follower in followers { follower.cancel() } }
            func settled(_ step: String) async throws {
                for (index, query) in queries.enumerated() {
                    let fresh = try await collection.query(filter: query.filter, order: query.order, limit: query.limit)
                    let same = try await eventually {
                        last[index].withLock { $0.map { $0.items == fresh.items && $0.skipped == fresh.skipped } ?? false }
                    }
                    #expect(same, "seed \(seed), \(step), query \(index): \(last[index].withLock { $0?.items.map(\.id) ?? [] }) != \(fresh.items.map(\.id))")
                }
            }
            try await settled("first results")
            // One put to a record every query shows: one model decoded, not the 300 of a result.
            let before = CountedItem.decoded.withLock { $0 }
            try await collection.put(CountedItem(id: "r1", v: 1_000, g: "a"))
            #expect(try await eventually { last[0].withLock { $0?.items.last == CountedItem(id: "r1", v: 1_000, g: "a") } })
            #expect(try await eventually { last[1].withLock { $0?.items.first?.id == "r1" } })
            let decodedByPut = CountedItem.decoded.withLock { $0 } - before
            #expect(decodedByPut <= queries.count, "a put decoded \(decodedByPut) models")
            // Distinct ids: one commit may not write a record twice.
            func distinct(_ count: Int) -> [UInt64] {
                var ids: [UInt64] = []
                while ids.count < count {
                    let id = random.next() % 320
                    if !ids.contains(id) { ids.append(id) }
                }
                return ids
            }
            for step in 0..<30 {
                switch random.next() % 5 {
                case 0: try await replica.put(try record(body(Int(random.next() % 320))), in: items)
                case 1: try? await replica.delete("r\(random.next() % 320)", in: items)
                case 2: try await replica.put(try record(#"{"g":"a","id":"r\#(random.next() % 320)","v":"not a number"}"#), in: items)
                case 3:
                    try await harness.putMany(distinct(Int(random.next() % 4 + 1)).map { body(Int($0)) })
                    _ = try await replica.sync()
                default:
                    try await collection.put(distinct(5).map { CountedItem(id: "r\($0)", v: Int(random.next() % 50), g: "b") })
                }
                try await settled("step \(step)")
            }
        }
    }
}

/// A model that is an object, which an app may change after a live query gave it.
final class ItemObject: Codable, @unchecked Sendable, Identifiable {
    let id: String
    var v: Int
    var g: String

    init(id: String, v: Int, g: String) { (self.id, self.v, self.g) = (id, v, g) }
}

extension TypedLiveQueryTests {
    @Test("Records leaving or moving in a typed live query cost no decode of the others; models that are objects are never handed back")
    func outOfStepAndObjects() async throws {
        try await withHarness { harness in
            func id(_ n: Int) -> String { "r\(1000 + n)" }
            try await harness.putMany((0..<400).map { #"{"g":"a","id":"\#(id($0))","v":\#($0)}"# })
            let replica = try await Replica.open(harness.configuration(snapshot: try await harness.bake("v1")))
            let counted = replica.collection(CountedItem.self, named: items)
            let last = Locked<TypedResult<CountedItem>?>(nil)
            let byV = Task {
                for try await result in counted.observe(filter: try Filter(parsing: #"{"g":{"eq":"a"}}"#), order: [.ascending("v")]) {
                    last.withLock { $0 = result }
                }
            }
            defer { byV.cancel() }
            #expect(try await eventually { last.withLock { $0?.items.count == 400 } })
            // Two neighbours leave at once, then one record moves from the end to the front.
            for (step, changes) in [
                [CountedItem(id: id(20), v: 20, g: "b"), CountedItem(id: id(21), v: 21, g: "b")], [CountedItem(id: id(399), v: -1, g: "a")],
            ].enumerated() {
                let before = CountedItem.decoded.withLock { $0 }
                try await counted.put(changes)
                let fresh = try await counted.query(filter: try Filter(parsing: #"{"g":{"eq":"a"}}"#), order: [.ascending("v")])
                #expect(try await eventually { last.withLock { $0?.items == fresh.items } }, "step \(step)")
                let decoded = CountedItem.decoded.withLock { $0 } - before - fresh.items.count
                #expect(decoded <= changes.count, "step \(step): the live query decoded \(decoded) models")
            }
            // Objects: the app changes one it was given; the next result holds new objects.
            let objects = replica.collection(ItemObject.self, named: items)
            let given = Locked<[ItemObject]>([])
            let follower = Task { for try await result in objects.observe(order: [.ascending("v")]) { given.withLock { $0 = result.items } } }
            defer { follower.cancel() }
            #expect(try await eventually { given.withLock { $0.count == 400 } })
            let first = given.withLock { $0[0] }
            first.v = 999
            try await objects.put(ItemObject(id: id(500), v: 500, g: "a"))
            #expect(try await eventually { given.withLock { $0.count == 401 } })
            #expect(given.withLock { $0[0] !== first && $0[0].v != 999 })
        }
    }
}

extension TypedLiveQueryTests {
    @Test("A LiveQuery's query changed to one that differs only in a string's bytes (é precomposed to decomposed) reads the new result")
    func queryChangedByBytes() async throws {
        let (composed, decomposed) = ("\u{E9}", "e\u{301}")
        try await withHarness { harness in
            try await harness.put(#"{"g":"\#(composed)","id":"r1","v":1}"#, #"{"g":"\#(decomposed)","id":"r2","v":2}"#)
            let replica = try await Replica.open(harness.configuration(snapshot: try await harness.bake("v1")))
            let live = await MainActor.run { LiveQuery(replica.collection(Item.self, named: items), filter: .compare(member: "g", .eq, .string(composed))) }
            #expect(try await eventually { await MainActor.run { live.elements.map(\.id) == ["r1"] } })
            await MainActor.run { live.query.filter = .compare(member: "g", .eq, .string(decomposed)) }
            #expect(try await eventually(.seconds(5)) { await MainActor.run { live.elements.map(\.id) == ["r2"] } })
            // The same for a sort key's member: two members, one of each form, order the records apart.
            try await harness.put(#"{"\#(composed)":1,"\#(decomposed)":2,"id":"s1"}"#, #"{"\#(composed)":2,"\#(decomposed)":1,"id":"s2"}"#)
            _ = try await replica.sync()
            let sorted = await MainActor.run { LiveQuery(replica, RecordQuery(items, filter: .exists(member: composed, true), order: [.ascending(composed)])) }
            #expect(try await eventually { await MainActor.run { sorted.elements.map(\.id) == ["s1", "s2"] } })
            await MainActor.run { sorted.query.order = [.ascending(decomposed)] }
            #expect(try await eventually(.seconds(5)) { await MainActor.run { sorted.elements.map(\.id) == ["s2", "s1"] } })
        }
    }

    @Test("Queries, sort keys and cursors are equal only when their strings hold the same bytes")
    func equalityByBytes() throws {
        let (composed, decomposed) = ("\u{E9}", "e\u{301}")
        #expect(RecordQuery(composed) != RecordQuery(decomposed))
        #expect(RecordQuery.SortKey.ascending(composed) != .ascending(decomposed))
        #expect(RecordQuery(items, order: [.ascending(composed)]) != RecordQuery(items, order: [.ascending(decomposed)]))
        #expect(RecordQuery(items, order: [.ascending(composed)]) == RecordQuery(items, order: [.ascending(composed)]))
        let query = RecordQuery(items)
        let (a, b) = (query.cursor(after: try record(#"{"id":"\#(composed)"}"#)), query.cursor(after: try record(#"{"id":"\#(decomposed)"}"#)))
        #expect(a != b && a == a)
        #expect(RecordQuery(items, after: a) != RecordQuery(items, after: b))
        #expect(RecordQuery(items, filter: .exists(member: composed, true)) != RecordQuery(items, filter: .exists(member: decomposed, true)))
    }

    @Test("Two records skipped for the same reason, whose ids differ only in their bytes, are two")
    func skippedByBytes() async throws {
        let (composed, decomposed) = ("\u{E9}", "e\u{301}")
        try await withHarness { harness in
            try await harness.put(#"{"g":"a","id":"\#(composed)","v":"x"}"#, #"{"g":"a","id":"\#(decomposed)","v":"x"}"#)
            let replica = try await Replica.open(harness.configuration(snapshot: try await harness.bake("v1")))
            let skipped = try await replica.collection(Item.self, named: items).query().skipped
            #expect(skipped.count == 2)
            #expect(skipped.first?.reason == skipped.last?.reason && skipped.first != skipped.last)
        }
    }
}

/// A model whose `someValue` is read from `some_value` only by a decoder that converts snake case.
struct SnakeItem: Codable, Sendable, Identifiable, Equatable {
    var id: String
    var someValue: Int?
}

extension TypedLiveQueryTests {
    @Test(
        "A typed live query decodes every model with its collection's decoder settings as they were when it started: a change afterwards mixes nothing in, and the next observe uses it"
    )
    func decoderSettingsPinned() async throws {
        try await withHarness { harness in
            try await harness.put(#"{"id":"r1","some_value":1}"#, #"{"id":"r2","some_value":2}"#)
            let replica = try await Replica.open(harness.configuration(snapshot: try await harness.bake("v1")))
            let collection = replica.collection(SnakeItem.self, named: items)
            let last = Locked<[SnakeItem]>([])
            let follower = Task { for try await result in collection.observe() { last.withLock { $0 = result.items } } }
            defer { follower.cancel() }
            #expect(try await eventually { last.withLock { $0 == [SnakeItem(id: "r1"), SnakeItem(id: "r2")] } })
            // The app changes the decoder the live query started with, then a record changes.
            collection.decoder.keyDecodingStrategy = .convertFromSnakeCase
            try await replica.put(try record(#"{"id":"r3","some_value":3}"#), in: items)
            #expect(try await eventually { last.withLock { $0.count == 3 } })
            #expect(last.withLock { $0 } == [SnakeItem(id: "r1"), SnakeItem(id: "r2"), SnakeItem(id: "r3")])
            // A query, and a live query started now, use the settings as they are.
            let expected = [SnakeItem(id: "r1", someValue: 1), SnakeItem(id: "r2", someValue: 2), SnakeItem(id: "r3", someValue: 3)]
            #expect(try await collection.query().items == expected)
            let now = Locked<[SnakeItem]>([])
            let second = Task { for try await result in collection.observe() { now.withLock { $0 = result.items } } }
            defer { second.cancel() }
            #expect(try await eventually { now.withLock { $0 == expected } })
        }
    }
}

extension TypedLiveQueryTests {
    @Test("A record that does not decode costs a typed live query its own decode, not every model's: a put beside it decodes one model")
    func undecodableBeside() async throws {
        try await withHarness { harness in
            try await harness.putMany((0..<300).map { #"{"g":"a","id":"r\#(1000 + $0)","v":\#($0)}"# } + [#"{"g":"a","id":"r0","v":"not a number"}"#])
            let replica = try await Replica.open(harness.configuration(snapshot: try await harness.bake("v1")))
            let counted = replica.collection(CountedItem.self, named: items)
            let last = Locked<TypedResult<CountedItem>?>(nil)
            let follower = Task { for try await result in counted.observe(order: [.ascending("v")]) { last.withLock { $0 = result } } }
            defer { follower.cancel() }
            #expect(try await eventually { last.withLock { $0?.items.count == 300 && $0?.skipped.map(\.id) == ["r0"] } })
            for (step, change) in [CountedItem(id: "r1005", v: -5, g: "a"), CountedItem(id: "r2000", v: 150, g: "a")].enumerated() {
                let before = CountedItem.decoded.withLock { $0 }
                try await counted.put(change)
                let fresh = try await counted.query(order: [.ascending("v")])
                #expect(try await eventually { last.withLock { $0?.items == fresh.items && $0?.skipped == fresh.skipped } }, "step \(step)")
                let decoded = CountedItem.decoded.withLock { $0 } - before - fresh.items.count
                #expect(decoded <= 1, "step \(step): the live query decoded \(decoded) models")
            }
        }
    }
}

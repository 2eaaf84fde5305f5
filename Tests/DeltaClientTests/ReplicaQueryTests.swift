import DeltaClient
import DeltaCore
import DeltaSQLite
import DeltaTestSupport
import Foundation
import Testing

@Suite("Replica: offline query and search")
struct ReplicaQueryTests {
    static let values = [
        #"1"#, #"1.0"#, #"1e0"#, #"10"#, #"-0"#, #"0"#, #"2.5"#, #"true"#, #"false"#, #"null"#, #""1""#, #""é""#, #""e\u0301""#, #""😀""#, #""""#,
        // Numbers SQLite holds as the same or neighbouring doubles, which ranges must not split.
        #"1.0000000000000001"#, #"0.99999999999999999"#, #"12345678901234567891"#,
        // Strings holding NUL, which SQLite's JSON ended at before 3.45 (its index keys then prefixes).
        #""b\u0000""#, #""b\u0000a""#, #""\u0000""#, #""1\u0000z""#,
    ]

    /// `count` random records `r0`, `r1`, …: members `a` (missing one time in `withoutAOneIn`) and
    /// `b` (missing one time in 3) holding values of `values`.
    static func records(_ count: Int, of values: [String], withoutAOneIn: UInt64, _ random: inout SeededGenerator) -> [String] {
        (0..<count).map { index in
            var members = [#""id":"r\#(index)""#]
            if random.next() % withoutAOneIn != 0 { members.append(#""a":\#(values[Int(random.next() % UInt64(values.count))])"#) }
            if random.next() % 3 != 0 { members.append(#""b":\#(values[Int(random.next() % UInt64(values.count))])"#) }
            return "{" + members.joined(separator: ",") + "}"
        }
    }

    @Test("random records and filters: an indexed query, an unindexed one and the filter applied to every record agree (pending writes included)")
    func indexedEqualsUnindexed() async throws {
        let seed = SeededGenerator.seed(for: "ReplicaQueryTests.indexedEqualsUnindexed")
        try await withHarness { harness in
            var random = SeededGenerator(seed: seed)
            func value() -> String { Self.values[Int(random.next() % UInt64(Self.values.count))] }
            try await harness.putMany(Self.records(200, of: Self.values, withoutAOneIn: 5, &random))
            let snapshot = try await harness.bake("v1")
            var indexed = harness.configuration("indexed", snapshot: snapshot)
            indexed.indexes = [items: ["a", "b"]]
            let withIndex = try await Replica.open(indexed)
            let without = try await Replica.open(harness.configuration("plain", snapshot: snapshot))
            for replica in [withIndex, without] {
                try await replica.put(try Record(parsing: Array(#"{"id":"r3","a":1,"b":"é"}"#.utf8)), in: items)
                try await replica.delete("r4", in: items)
            }
            var filters: [String] = []
            for _ in 0..<300 {
                let member = random.next() % 2 == 0 ? "a" : "b"
                switch random.next() % 7 {
                case 5: filters.append(#"{"\#(member)":{"\#(["lt", "lte", "gt", "gte"][Int(random.next() % 4)])":\#(value())}}"#)
                case 6: filters.append(#"{"and":[{"\#(member)":{"gte":\#(value())}},{"\#(member)":{"lt":\#(value())}}]}"#)
                case 0: filters.append(#"{"\#(member)":{"eq":\#(value())}}"#)
                case 1: filters.append(#"{"\#(member)":{"in":[\#(value()),\#(value())]}}"#)
                case 2: filters.append(#"{"and":[{"\#(member)":{"eq":\#(value())}},{"b":{"exists":\#(random.next() % 2 == 0)}}]}"#)
                case 3: filters.append(#"{"or":[{"a":{"lt":\#(value())}},{"not":{"b":{"gte":\#(value())}}}]}"#)
                default: filters.append(#"{"\#(member)":{"ne":\#(value())}}"#)
                }
            }
            let all = try await withIndex.records(in: items)
            var failures: [String] = []
            for (round, filter) in filters.enumerated() {
                let parsed = try Filter(parsing: filter)
                let expected = all.filter { parsed.matches(body: $0.body) }.map(\.id)
                if try await withIndex.query(items, filter: parsed).map(\.id) != expected { failures.append("round \(round): indexed \(filter)") }
                if try await without.query(items, filter: parsed).map(\.id) != expected { failures.append("round \(round): unindexed \(filter)") }
                // A page by id: read in SQL's id order and cut there when SQL decides the filter.
                let page = Array(expected.prefix(3))
                if try await withIndex.query(items, filter: parsed, limit: 3).map(\.id) != page {
                    failures.append("round \(round): indexed, limit 3, \(filter)")
                }
                if try await without.query(items, filter: parsed, limit: 3).map(\.id) != page {
                    failures.append("round \(round): unindexed, limit 3, \(filter)")
                }
            }
            #expect(failures.isEmpty, "seed \(seed): \(failures.prefix(5))")
            // Local deletes of the first records by id: a page read in SQL reads past what they hide.
            for replica in [withIndex, without] {
                for record in try await replica.records(in: items).prefix(2) { try await replica.delete(record.id, in: items) }
                let visible = try await replica.records(in: items).map(\.id)
                #expect(try await replica.query(items, limit: 3).map(\.id) == Array(visible.prefix(3)))
            }
        }
    }

    @Test("random ordered, limited queries: walking the first sort key's index returns what sorting every match does (pending writes included)")
    func indexedOrderEqualsSort() async throws {
        let seed = SeededGenerator.seed(for: "ReplicaQueryTests.indexedOrderEqualsSort")
        // Beside the shared values: numbers SQLite holds only as doubles (equal there, not in
        // JSONOrder), arrays and objects (which SQL compares as text), and few distinct values, so
        // that ties at the cut are common.
        let values =
            Self.values + [
                #"12345678901234567890"#, #"0.1"#, #"-1e300"#, #"[1]"#, #"[0,2]"#, #"{"x":1}"#,
                #"{}"#, #""b""#,
            ]
        try await withHarness { harness in
            var random = SeededGenerator(seed: seed)
            func scalar() -> String { Self.values[Int(random.next() % UInt64(Self.values.count))] }
            try await harness.putMany(Self.records(300, of: values, withoutAOneIn: 6, &random))
            let snapshot = try await harness.bake("v1")
            var indexed = harness.configuration("indexed", snapshot: snapshot)
            indexed.indexes = [items: ["a", "b"]]
            indexed.compoundIndexes = [items: [["a", "b"], ["b", "a"]]]
            let withIndex = try await Replica.open(indexed)
            let without = try await Replica.open(harness.configuration("plain", snapshot: snapshot))
            // Compound indexes alone, without the members' own.
            var compoundOnly = harness.configuration("compound", snapshot: snapshot)
            compoundOnly.compoundIndexes = [items: [["a", "b"], ["b", "a"]]]
            let withCompound = try await Replica.open(compoundOnly)
            var wide = harness.configuration("wide", snapshot: snapshot)
            wide.compoundIndexes = [items: [["a", "b", "id"]]]
            await #expect(throws: ReplicaError.self) { try await Replica.open(wide) }
            for replica in [withIndex, without, withCompound] {
                try await replica.put(try Record(parsing: Array(#"{"id":"r3","a":1,"b":"é"}"#.utf8)), in: items)
                try await replica.put(try Record(parsing: Array(#"{"id":"local","a":false}"#.utf8)), in: items)
                try await replica.delete("r4", in: items)
                try await replica.delete("r5", in: items)
            }
            var failures: [String] = []
            for round in 0..<400 {
                let member = random.next() % 2 == 0 ? "a" : "b"
                var order = [RecordQuery.SortKey(member, descending: random.next() % 2 == 0)]
                if random.next() % 3 == 0 { order.append(RecordQuery.SortKey(member == "a" ? "b" : "a", descending: random.next() % 2 == 0)) }
                let filter: Filter? =
                    switch random.next() % 7 {
                    case 5: try Filter(parsing: #"{"\#(member)":{"\#(["lt", "lte", "gt", "gte"][Int(random.next() % 4)])":\#(scalar())}}"#)
                    case 6: try Filter(parsing: #"{"and":[{"\#(order.count > 1 ? order[1].member : member)":{"gt":\#(scalar())}},{"a":{"exists":true}}]}"#)
                    case 0: nil
                    case 1: try Filter(parsing: #"{"\#(member == "a" ? "b" : "a")":{"eq":\#(scalar())}}"#)
                    case 2: try Filter(parsing: #"{"b":{"in":["1","é","b"]}}"#)
                    case 3: try Filter(parsing: #"{"and":[{"\#(member == "a" ? "b" : "a")":{"eq":\#(scalar())}},{"a":{"ne":\#(scalar())}}]}"#)
                    default: try Filter(parsing: #"{"or":[{"a":{"lt":\#(scalar())}},{"b":{"exists":false}}]}"#)
                    }
                let (limit, offset) = (Int(random.next() % 12) + 1, Int(random.next() % 4))
                let everything = try await without.query(RecordQuery(items, filter: filter, order: order)).map(\.id)
                let expected = Array(everything.dropFirst(offset).prefix(limit))
                let query = RecordQuery(items, filter: filter, order: order, limit: limit, offset: offset)
                let walked = try await withIndex.query(query).map(\.id)
                if walked != expected {
                    var bodies: [String] = []
                    for id in Set(walked).symmetricDifference(expected) {
                        bodies.append(try await without.record(id, in: items).map { String(decoding: $0.body, as: UTF8.self) } ?? id)
                    }
                    failures.append(
                        "round \(round): \(order) \(String(describing: filter)) limit \(limit) offset \(offset): \(walked) != \(expected); \(bodies)")
                }
                let sorted = try await without.query(query).map(\.id)
                if sorted != expected { failures.append("round \(round), unindexed: \(sorted) != \(expected)") }
                let compound = try await withCompound.query(query).map(\.id)
                if compound != expected { failures.append("round \(round), compound only: \(compound) != \(expected)") }
            }
            #expect(failures.isEmpty, "seed \(seed): \(failures.prefix(3))")
        }
    }

    @Test("order, limit and typed decoding")
    func orderAndDecode() async throws {
        struct Item: Decodable, Equatable {
            let id: String
            let n: Int?
        }
        try await withHarness { harness in
            try await harness.put(#"{"id":"a","n":3}"#, #"{"id":"b","n":1}"#, #"{"id":"c"}"#, #"{"id":"d","n":2}"#)
            let replica = try await Replica.open(harness.configuration(snapshot: try await harness.bake("v1")))
            await #expect(try replica.query(items, orderBy: "n").map(\.id) == ["b", "d", "a", "c"])
            await #expect(try replica.query(items, orderBy: "n", descending: true, limit: 2).map(\.id) == ["a", "d"])
            await #expect(try replica.query(items, filter: Filter(parsing: #"{"n":{"gte":2}}"#), as: Item.self) == [Item(id: "a", n: 3), Item(id: "d", n: 2)])
        }
    }

    @Test(
        "ids equal only canonically (é precomposed, and e with a combining accent) are two records to every query, live query and patch, as they are to the store"
    )
    func canonicallyEqualIds() async throws {
        let (composed, decomposed) = ("\u{E9}", "e\u{301}")
        #expect(composed == decomposed && Array(composed.utf8) != Array(decomposed.utf8))
        // Change notes that name one or the other are not equal, though their sets of strings are.
        #expect(Set([composed]) == Set([decomposed]))
        #expect(ChangedIDs.ids([composed]) != ChangedIDs.ids([decomposed]))
        #expect(ChangedIDs.ids([composed, "a"]) == ChangedIDs.ids(["a", composed]))
        #expect(ChangedIDs.ids([]) != ChangedIDs.all && ChangedIDs.all == ChangedIDs.all)
        try await withHarness { harness in
            try await harness.put(#"{"id":"\#(composed)","n":1}"#, #"{"id":"a","n":0}"#)
            var configuration = harness.configuration(snapshot: try await harness.bake("v1"))
            configuration.indexes = [items: ["n"]]
            let replica = try await Replica.open(configuration)
            let queries = [
                RecordQuery(items), RecordQuery(items, order: [.ascending("n")]), RecordQuery(items, order: [.ascending("n")], limit: 5),
                RecordQuery(items, filter: try Filter(parsing: #"{"n":{"gte":0}}"#)),
            ]
            let yields = queries.map { _ in Yields() }
            let followers = zip(queries, yields).map { follow(replica, $0, into: $1) }
            defer { for follower in followers { follower.cancel() } }
            func bodies(_ query: RecordQuery) async throws -> [String] { try await replica.query(query).map { String(decoding: $0.body, as: UTF8.self) } }
            // A delta of both: the sync's change notes cannot list both in a set of strings; they say "all".
            try await harness.put(#"{"id":"\#(decomposed)","n":7}"#, #"{"id":"\#(composed)","n":8}"#)
            let report = try await replica.sync()
            #expect(report.collections.first { $0.collection == items }?.changed == .all)
            try await harness.put(#"{"id":"\#(decomposed)","n":1}"#)
            _ = try await replica.sync()
            // A local version of the decomposed id beside the server's composed one, then local
            // versions of both, then an edit of each: the store holds two records throughout.
            for (step, json) in [
                #"{"id":"\#(decomposed)","n":2}"#, #"{"id":"\#(composed)","n":3}"#, #"{"id":"\#(decomposed)","n":4}"#, #"{"id":"\#(composed)","n":5}"#,
            ].enumerated() {
                try await replica.put(try record(json), in: items)
                let stored = try await replica.records(in: items).map(\.id)
                #expect(stored.count == 3, "step \(step): \(stored)")
                for (index, query) in queries.enumerated() {
                    let found = try await bodies(query)
                    #expect(found.count == 3, "step \(step), query \(index): \(found)")
                    #expect(found.contains(json), "step \(step), query \(index): \(found)")
                    #expect(try await eventually { yields[index].last == found }, "step \(step), live query \(index): \(yields[index].last ?? [])")
                }
            }
        }
    }

    @Test("a limited query over more matches than it keeps (cut as they come) returns what sorting them all would")
    func limitedQueryKeepsTheBest() async throws {
        try await withHarness { harness in
            try await harness.putMany((0..<6000).map { #"{"id":"r\#($0)","n":\#(($0 * 7919) % 6007),"odd":\#($0 % 2 == 1)}"# })
            let replica = try await Replica.open(harness.configuration(snapshot: try await harness.bake("v1")))
            let all = try await replica.records(in: items)
            let odd = try Filter(parsing: #"{"odd":{"eq":true}}"#)
            let byN = try all.filter { odd.matches(body: $0.body) }.sorted {
                let (a, b) = (try JSONValue(parsing: $0.body)["n"]!, try JSONValue(parsing: $1.body)["n"]!)
                return JSONOrder.compare(a, b) == .greater
            }
            let found = try await replica.query(items, filter: odd, orderBy: "n", descending: true, limit: 5)
            #expect(found.map(\.id) == byN.prefix(5).map(\.id))
            let first = try await replica.query(items, limit: 3)
            #expect(first.map(\.id) == all.prefix(3).map(\.id))
        }
    }

    @Test("search finds what it should after a delta, a reset and a local write, and forgets hidden records")
    func search() async throws {
        try await withHarness { harness in
            try await harness.put(#"{"id":"a","name":"Wellington International","city":"Wellington"}"#, #"{"id":"b","name":"Auckland","city":"Auckland"}"#)
            var configuration = harness.configuration(snapshot: try await harness.bake("v1"), viaProxy: true)
            configuration.searchable = [items: ["name"]]
            let replica = try await Replica.open(configuration)
            await #expect(try replica.search("wellington", in: items).map(\.id) == ["a"])
            await #expect(try replica.search("intern", in: items).map(\.id) == ["a"])  // the last word is a prefix
            await #expect(try replica.search("Ünknown", in: items).isEmpty)
            try await harness.put(#"{"id":"c","name":"Wellington Heliport","city":"Wellington"}"#)
            try await harness.hide("a")
            _ = try await replica.sync()
            await #expect(try replica.search("wellington", in: items).map(\.id) == ["c"])
            await #expect(try replica.search("auckland", in: items).map(\.id) == ["b"])
            // Only chosen members: "city" is not searched.
            try await harness.put(#"{"id":"d","name":"Rongotai","city":"Wellington"}"#)
            _ = try await replica.sync()
            await #expect(try replica.search("rongotai", in: items).map(\.id) == ["d"])
            await #expect(try replica.search("wellington", in: items).map(\.id) == ["c"])
            // A local write is found at once, and its server version no longer is.
            try await replica.put(try Record(parsing: Array(#"{"id":"b","name":"Auckland Airport"}"#.utf8)), in: items)
            await #expect(try replica.search("airport", in: items).map(\.id) == ["b"])
            try await replica.delete("c", in: items)
            await #expect(try replica.search("heliport", in: items).isEmpty)
            // A reset restores the snapshot (where "a" is visible) and applies the delta from it again.
            _ = try await replica.sync()  // pushes the local writes (a push would take the proxy's next plan)
            try await harness.put(#"{"id":"e","name":"Paraparaumu"}"#)
            harness.proxy.plan(.wrongShape)
            let report = try await replica.sync()
            #expect(report.collections.first?.reset != nil)
            await #expect(try replica.search("paraparaumu", in: items).map(\.id) == ["e"])
            await #expect(try replica.search("rongotai", in: items).map(\.id) == ["d"])
            await #expect(try replica.search("international", in: items).isEmpty)
            await #expect(try replica.search("airport", in: items).map(\.id) == ["b"])
            await #expect(try replica.search("heliport", in: items).isEmpty)
            await #expect(throws: ReplicaError.self) { try await replica.search("x", in: "other") }
        }
    }

    @Test(
        "search finds the words after a NUL character (SQLite before 3.45 ends a JSON value there), synced or written here; a store indexed the old way is indexed again on open"
    )
    func searchPastNUL() async throws {
        try await withHarness { harness in
            // "b" holds the six characters \u0000 after a backslash, not a NUL: its JSON stays valid.
            try await harness.put(#"{"id":"a","name":"Kapiti\u0000Coast"}"#, #"{"id":"b","name":"C:\\u0000path"}"#)
            var configuration = harness.configuration(snapshot: try await harness.bake("v1"))
            configuration.searchable = [items: ["name"]]
            let replica = try await Replica.open(configuration)
            await #expect(try replica.search("coast", in: items).map(\.id) == ["a"])
            await #expect(try replica.search("kapiti", in: items).map(\.id) == ["a"])
            #expect(try await replica.contents()["b"] == #"{"id":"b","name":"C:\\u0000path"}"#)
            try await harness.put(#"{"id":"c","name":"Otaki\u0000Beach"}"#)
            _ = try await replica.sync()
            await #expect(try replica.search("beach", in: items).map(\.id) == ["c"])
            try await replica.put(try Record(parsing: Array(#"{"id":"d","name":"Waikanae\u0000Estuary"}"#.utf8)), in: items)
            await #expect(try replica.search("estuary", in: items).map(\.id) == ["d"])

            // A store indexed by the version before: its trigger and rows computed the text without the replacement.
            do {
                let store = try Connection(path: configuration.storeURL.path, mode: .readWrite)
                let old = "(SELECT group_concat(value, ' ') FROM json_each(new.body) WHERE type = 'text' AND key IN ('name'))"
                try store.execute(
                    """
                    DROP TRIGGER search_items_insert;
                    CREATE TRIGGER search_items_insert AFTER INSERT ON records WHEN new.collection = 'items' BEGIN
                        INSERT INTO search(collection, id, text) VALUES (new.collection, new.id, \(old));
                    END;
                    DELETE FROM search WHERE collection = 'items';
                    INSERT INTO search(collection, id, text)
                        SELECT collection, id, (SELECT group_concat(value, ' ') FROM json_each(body) WHERE type = 'text' AND key IN ('name')) FROM records WHERE collection = 'items';
                    """)
            }
            let reopened = try await Replica.open(configuration)
            await #expect(try reopened.search("coast", in: items).map(\.id) == ["a"])
            await #expect(try reopened.search("beach", in: items).map(\.id) == ["c"])
        }
    }
}

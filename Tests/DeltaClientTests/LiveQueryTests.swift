import DeltaClient
import DeltaCore
import DeltaSQLite
import DeltaTestSupport
import Foundation
import Testing

/// What one live query has yielded so far.
final class Yields: Sendable {
    let values = Locked([[String]]())
    var count: Int { values.withLock { $0.count } }
    var last: [String]? { values.withLock { $0.last } }
}

/// Follows `replica.observe(query)` into `yields` (each result as its records' JSON) until cancelled.
func follow(_ replica: Replica, _ query: RecordQuery, into yields: Yields) -> Task<Void, any Error> {
    Task {
        for try await result in replica.observe(query) {
            yields.values.withLock { $0.append(result.map { String(decoding: $0.body, as: UTF8.self) }) }
        }
    }
}

/// Waits until `condition` holds (at most `timeout`).
func eventually(_ timeout: Duration = .seconds(60), _ condition: () async throws -> Bool) async throws -> Bool {
    let deadline = ContinuousClock.now + timeout
    while try await !condition() {
        if ContinuousClock.now > deadline { return false }
        try await Task.sleep(for: .milliseconds(5))
    }
    return true
}

extension RecordQuery {
    /// This query, paging on after the record `body`.
    func after(_ body: String) -> RecordQuery {
        var query = self
        query.after = cursor(after: try! Record(parsing: Array(body.utf8)))
        return query
    }
}

/// A random record `r<id>` of the live query tests.
private func body(_ id: Int, _ random: inout SeededGenerator) -> String {
    #"{"g":"\#(Bool.random(using: &random) ? "a" : "b")","id":"r\#(id)","v":\#(Int.random(in: 0..<10, using: &random))}"#
}

@Suite("Live queries: a result when it changed, and only then")
struct LiveQueryTests {
    static let queries = [
        RecordQuery(items),
        RecordQuery(items, filter: try! Filter(parsing: #"{"v":{"gte":5}}"#), order: [.descending("v")], limit: 3),
        RecordQuery(items, filter: try! Filter(parsing: #"{"g":{"eq":"a"}}"#), order: [.ascending("g"), .descending("v")]),
        RecordQuery(items, order: [.ascending("v")], limit: 2, offset: 1),
        RecordQuery(items, filter: try! Filter(parsing: #"{"v":{"lt":7}}"#), order: [.ascending("v")], limit: 50),
        RecordQuery(items, order: [.descending("g"), .ascending("v")]).after(#"{"g":"b","id":"r5","v":4}"#),
    ]

    @Test(
        "Random deltas, resets, local puts and deletes, conflicts resolved, sign-out: each live query yields exactly when its result changed, and its last value is the query run fresh"
    )
    func randomized() async throws {
        let seed = SeededGenerator.seed(for: "LiveQueryTests.randomized")
        var random = SeededGenerator(seed: seed)
        let initial = (0..<8).map { body($0, &random) }
        let plannedSeed = random.next()
        try await withHarness { harness in
            var random = SeededGenerator(seed: plannedSeed)
            try await harness.putMany(initial)
            let snapshot = try await harness.bake("v1")
            let replica = try await Replica.open(harness.configuration(snapshot: snapshot, viaProxy: true))
            let yields = Self.queries.map { _ in Yields() }
            let followers = zip(Self.queries, yields).map { follow(replica, $0, into: $1) }
            defer { for follower in followers { follower.cancel() } }
            var expected: [(result: [String], yields: Int)] = []
            for query in Self.queries { expected.append((try await replica.query(query).map { String(decoding: $0.body, as: UTF8.self) }, 1)) }
            for (index, yielded) in yields.enumerated() {
                #expect(try await eventually { yielded.count == 1 }, "seed \(seed): query \(index) did not yield its first result")
                #expect(yielded.last == expected[index].result)
            }
            var kinds: [String: Int] = [:]
            for step in 0..<40 {
                let kind: String
                switch Int.random(in: 0..<8, using: &random) {
                case 0, 1:
                    kind = "delta"
                    let ids = Set((0..<Int.random(in: 1...3, using: &random)).map { _ in Int.random(in: 0..<12, using: &random) })
                    try await harness.putMany(ids.sorted().map { body($0, &random) })
                    if Bool.random(using: &random), let gone = try await harness.serverRecords().keys.sorted().randomElement(using: &random) {
                        try await harness.hide(gone)
                    }
                    _ = try await replica.sync()
                case 2:
                    kind = "local put"
                    try await replica.put(try record(body(Int.random(in: 0..<12, using: &random), &random)), in: items)
                case 3:
                    kind = "unchanged put"
                    guard let any = try await replica.records(in: items).randomElement(using: &random) else { continue }
                    try await replica.put(any, in: items)
                case 4:
                    kind = "local delete"
                    guard let any = try await replica.records(in: items).randomElement(using: &random) else { continue }
                    try await replica.delete(any.id, in: items)
                case 5:
                    kind = "reset"
                    harness.proxy.plan(.corruptGzip)
                    _ = try await replica.sync()
                case 6:
                    // Writers racing the live queries' patches: each result must still end as the query run fresh.
                    kind = "burst of puts and deletes"
                    let writes = (0..<24).map { _ in (Int.random(in: 0..<12, using: &random), Int.random(in: 0..<4, using: &random) == 0) }
                    let bodies = writes.map { body($0.0, &random) }
                    try await withThrowingTaskGroup(of: Void.self) { group in
                        for lane in 0..<4 {
                            group.addTask {
                                for index in stride(from: lane, to: writes.count, by: 4) {
                                    if writes[index].1 {
                                        try? await replica.delete("r\(writes[index].0)", in: items)
                                    } else {
                                        try await replica.put(try record(bodies[index]), in: items)
                                    }
                                }
                            }
                        }
                        try await group.waitForAll()
                    }
                    // Any number of results on the way (each write may show); the last must be the fresh one.
                    for (index, query) in Self.queries.enumerated() {
                        let fresh = try await replica.query(query).map { String(decoding: $0.body, as: UTF8.self) }
                        #expect(
                            try await eventually(.seconds(10)) { yields[index].last == fresh },
                            "seed \(seed), step \(step) (burst): query \(index) did not settle on the fresh result")
                        try await Task.sleep(for: .milliseconds(30))
                        expected[index] = (fresh, yields[index].count)
                    }
                default:
                    kind = "conflict resolved"
                    let id = Int.random(in: 0..<12, using: &random)
                    try await replica.put(try record(body(id, &random)), in: items)
                    try await check(replica, yields, &expected, "seed \(seed), step \(step) (conflict: local put)")
                    try await harness.put(body(id, &random))
                    _ = try? await replica.sync()
                    try await check(replica, yields, &expected, "seed \(seed), step \(step) (conflict: sync)")
                    for conflict in try await replica.conflicts() {
                        try await replica.resolve(conflict.id, in: items, Bool.random(using: &random) ? .keepServer : .keepLocal)
                        try await check(replica, yields, &expected, "seed \(seed), step \(step) (conflict: resolve \(conflict.id))")
                    }
                }
                kinds[kind, default: 0] += 1
                try await check(replica, yields, &expected, "seed \(seed), step \(step) (\(kind))")
            }
            try await replica.signOut(discardingPendingWrites: true)
            try await check(replica, yields, &expected, "seed \(seed), sign-out")
            print("LiveQueryTests.randomized: seed \(seed): \(kinds.sorted { $0.key < $1.key })")
        }
    }

    /// Each query's fresh result against what it yielded: one more yield with it when it changed,
    /// none otherwise (`expected` holds the last results, one yield each).
    private func check(_ replica: Replica, _ yields: [Yields], _ expected: inout [(result: [String], yields: Int)], _ context: String) async throws {
        var fresh: [[String]] = []
        for query in Self.queries { fresh.append(try await replica.query(query).map { String(decoding: $0.body, as: UTF8.self) }) }
        for index in yields.indices where fresh[index] != expected[index].result {
            expected[index] = (fresh[index], expected[index].yields + 1)
            let wanted = expected[index].yields
            #expect(try await eventually { yields[index].count >= wanted }, "\(context): query \(index) changed but did not yield")
        }
        // Time for a wrong yield to arrive; the next step catches a later one.
        try await Task.sleep(for: .milliseconds(30))
        for index in yields.indices {
            #expect(
                yields[index].count == expected[index].yields,
                "\(context): query \(index) yielded \(yields[index].count) times, \(expected[index].yields) expected")
            #expect(yields[index].last == fresh[index], "\(context): query \(index)'s last value is not the query run fresh")
        }
    }
}

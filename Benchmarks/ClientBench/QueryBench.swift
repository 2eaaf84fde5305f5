// Queries in SQL (issue 37): a filtered, ordered, limited query over 100,000 records, and a
// LiveQuery's refresh after a local write on 5,000, each beside its baseline in the same run.
//   deltasnap-bench-live query BIG_SNAPSHOT SMALL_SNAPSHOT DIRECTORY [ROUNDS]
import DeltaClient
import DeltaCore
import DeltaSQLite
import Foundation
import Observation

/// Runs the query measures and prints one line per measure.
func queryBench(big: URL, small: URL, directory: URL, rounds: Int) async throws {
    let clock = ContinuousClock()
    let unused = URL(string: "http://127.0.0.1:9/api")!  // never contacted: nothing here syncs
    func open(_ name: String, _ snapshot: URL, indexes: [String], compound: [[String]] = []) async throws -> Replica {
        var configuration = ReplicaConfiguration(storeURL: directory.appendingPathComponent(name), snapshotURL: snapshot, serverURL: unused)
        configuration.indexes = ["items": indexes]
        configuration.compoundIndexes = ["items": compound]
        return try await Replica.open(configuration)
    }

    // 1. The 20 cheapest of one category (about 1,030 of 100,000 match), by price.
    let compound = try await open("compound.sqlite", big, indexes: ["category", "price"], compound: [["category", "price"]])
    let both = try await open("both.sqlite", big, indexes: ["category", "price"])
    let categoryOnly = try await open("category.sqlite", big, indexes: ["category"])
    let query = RecordQuery("items", filter: .compare(member: "category", .eq, "cat-5"), order: [.ascending("price")], limit: 20)
    let sql = """
        SELECT id, body FROM records WHERE collection = 'items' AND json_extract(body, '$."category"') = 'cat-5'
        ORDER BY json_extract(body, '$."price"'), id LIMIT 20
        """
    let raw = try Connection(path: directory.appendingPathComponent("compound.sqlite").path, mode: .readOnly)
    func rawQuery() throws -> [String] {
        let statement = try raw.statement(sql)
        defer { statement.reset() }
        var ids: [String] = []
        while try statement.step() {
            ids.append(statement.string(0))
            _ = statement.bytes(1)
        }
        return ids
    }
    let expected = try rawQuery()
    precondition(expected.count == 20)
    var walked: [Double] = []
    var single: [Double] = []
    var sorted: [Double] = []
    var sqlite: [Double] = []
    for _ in 0..<max(rounds, 20) {
        var start = clock.now
        let a = try await compound.query(query)
        walked.append(milliseconds(clock.now - start))
        start = clock.now
        let d = try await both.query(query)
        single.append(milliseconds(clock.now - start))
        start = clock.now
        let b = try await categoryOnly.query(query)
        sorted.append(milliseconds(clock.now - start))
        start = clock.now
        let c = try rawQuery()
        sqlite.append(milliseconds(clock.now - start))
        precondition(a.map(\.id) == expected && b.map(\.id) == expected && c == expected && d.map(\.id) == expected, "the answers differ")
    }
    let plan = try raw.statement("EXPLAIN QUERY PLAN " + sql)
    var steps: [String] = []
    while try plan.step() { steps.append(plan.string(3)) }
    plan.reset()
    report("query: 20 cheapest of one category, 100,000 records, compound index (category, price): the walk", walked)
    report("  the same, price indexed alone: the walk along price, category checked per row", single)
    report("  the same, only category indexed: every match read and sorted (as before the walk)", sorted)
    report(
        "  the same SQL on SQLite alone, compound index (no pending writes, SQLite's order)", sqlite,
        String(format: "walk/SQLite %.2f×; plan: %@", percentile(walked, 0.5) / percentile(sqlite, 0.5), steps.joined(separator: "; ")))

    // 2. Reads from 50 callers at once (a screen of cells, each asking for its record): the time
    // each caller waits for its answer, beside the same read by one caller alone.
    var alone: [Double] = []
    var crowded: [Double] = []
    for round in 0..<max(rounds / 10, 5) {
        for index in 0..<50 {
            let start = clock.now
            _ = try await compound.record(String(format: "rec%07d", (round * 50 + index) * 37 % 100_000), in: "items")
            alone.append(milliseconds(clock.now - start))
        }
        let waits = try await withThrowingTaskGroup(of: Double.self) { group in
            for index in 0..<50 {
                group.addTask {
                    let start = clock.now
                    _ = try await compound.record(String(format: "rec%07d", (round * 50 + index) * 41 % 100_000), in: "items")
                    return milliseconds(clock.now - start)
                }
            }
            return try await group.reduce(into: [Double]()) { $0.append($1) }
        }
        crowded.append(contentsOf: waits)
    }
    report("50 callers at once, each reading one record by id: each caller's wait", crowded)
    report("  one record by id, one caller at a time", alone)

    // 3. A LiveQuery's new value after a local put, on 5,000 records: the whole collection by id,
    // and the 50 cheapest by the price index.
    let replica = try await open("small.sqlite", small, indexes: ["price"])
    for (name, live) in [
        ("all 5,000 by id", RecordQuery("items")),
        ("the 50 cheapest (price indexed)", RecordQuery("items", order: [.ascending("price")], limit: 50)),
    ] {
        let observed = await MainActor.run { LiveQuery(replica, live) }
        while await MainActor.run(body: { !observed.isLoaded }) { try await Task.sleep(for: .milliseconds(1)) }
        let (refresh, putAlone) = try await putToLive(replica, observed, rounds: rounds, firstMarker: 3_000_000, price: 0)
        report("local put to LiveQuery, \(name)", refresh)
        report("  of which put() itself", putAlone)
    }
    // The same, typed: all 5,000 as `Codable` models (a record that did not change keeps its model).
    let typed = await MainActor.run { LiveQuery(replica.collection(Item.self, named: "items")) }
    while await MainActor.run(body: { !typed.isLoaded }) { try await Task.sleep(for: .milliseconds(1)) }
    let (typedRefresh, _) = try await putToLive(replica, typed, rounds: rounds, firstMarker: 4_000_000, price: 0)
    report("local put to LiveQuery, all 5,000 by id, typed (Codable)", typedRefresh)
}

/// What a live query's elements are to the benches: a record, or the `Item` model.
protocol Marked: Sendable {
    /// The record's id.
    var markedID: String { get }
    /// Whether it holds `"v": marker`.
    func holds(_ marker: Int) -> Bool
}

extension Record: Marked {
    var markedID: String { id }
    func holds(_ marker: Int) -> Bool { body.firstRange(of: Array(#""v":\#(marker)"#.utf8)) != nil }
}

extension Item: Marked {
    var markedID: String { id }
    func holds(_ marker: Int) -> Bool { v == marker }
}

/// `rounds` local puts of record `rec0000010` (at `price`, marked `"v"` from `firstMarker` on),
/// each timed to the moment `live` holds it, and the `put()` alone beside it.
func putToLive<Element: Marked>(_ replica: Replica, _ live: LiveQuery<Element>, rounds: Int, firstMarker: Int, price: Int) async throws -> (
    toLive: [Double], put: [Double]
) {
    let clock = ContinuousClock()
    var toLive: [Double] = []
    var put: [Double] = []
    for round in 0..<rounds {
        let marker = firstMarker + round
        let record = try Record(
            parsing: Array(
                #"{"category":"cat-5","description":"local","id":"rec0000010","name":"Record number 10","price":\#(price),"stock":1,"tags":[],"v":\#(marker)}"#
                    .utf8))
        let start = clock.now
        try await replica.put(record, in: "items")
        put.append(milliseconds(clock.now - start))
        await waitForMarker(marker, in: "rec0000010", of: live)
        toLive.append(milliseconds(clock.now - start))
    }
    return (toLive, put)
}

/// Waits until `live`'s element `id` holds `"v": marker`: checked on the main actor each time
/// `elements` changes (Observation's `onChange`), not by polling, which would keep the main actor busy.
@MainActor func waitForMarker<Element: Marked>(_ marker: Int, in id: String, of live: LiveQuery<Element>) async {
    while live.elements.first(where: { $0.markedID == id })?.holds(marker) != true {
        // Registered in the same main-actor turn as the check: no change falls between them.
        await withCheckedContinuation { continuation in
            withObservationTracking {
                _ = live.elements
            } onChange: {
                continuation.resume()
            }
        }
    }
}

import DeltaCore
import DeltaStore
import DeltaTestSupport
import Foundation
import Testing

@Suite("Compaction: history dropped before a horizon, exact answers after it")
struct CompactionTests {
    /// A selection's answer from `since`: its rows and token (`[]` and the token for a 304).
    static func selectionAnswer(_ store: any ChangeStore, _ selection: Selection, since: Since) async throws -> (rows: [Row], token: Token) {
        guard case .source(let source, let mode) = try await store.openSelectionRead(name("w"), since: since, client: nil).start else {
            throw TestFailure("no selection source")
        }
        let mark: SelectionMark? = if case .token(let token) = since { token.selection } else { nil }
        switch try await SelectionFeed.open(source, mode, selection: selection, mark: mark) {
        case .changes(let feed): return (try await drain(feed), feed.token)
        case .notModified(let token, _): return ([], token)
        case .rejected(let why): throw TestFailure("rejected: \(why)")
        }
    }

    @Test(
        "Hidden records and superseded versions at or before the horizon are dropped; older tokens expire; plain and selection deltas from the horizon on are what they were; the digest does not move",
        arguments: Backend.available)
    func exactAfterHorizon(backend: Backend) async throws {
        let directory = URL(fileURLWithPath: try makeTemporaryDirectory("compaction"))
        defer { try? FileManager.default.removeItem(at: directory) }
        let database = try await backend.makeDatabase(in: directory)
        let store = try await database.open()
        let selection = try Selection(filter: #"{"n":{"gte":2}}"#, limit: nil)
        let old = try await put(store, "w", #"{"id":"a","n":1}"#, #"{"id":"b","n":1}"#, #"{"id":"c","n":2}"#, #"{"id":"d","n":2}"#).token
        try await put(store, "w", #"{"id":"a","n":2}"#, #"{"id":"b","n":3}"#)
        let horizon = try await store.write(to: name("w")) { try await $0.hide(id: "c") }.commit.token
        let selectionToken = try await Self.selectionAnswer(store, selection, since: .nothing).token
        try await put(store, "w", #"{"id":"a","n":0}"#, #"{"id":"e","n":5}"#)
        _ = try await store.write(to: name("w")) { try await $0.hide(id: "d") }
        let plainBefore = try await store.read(name("w"), since: .token(horizon)).rows()
        let selectionBefore = try await Self.selectionAnswer(store, selection, since: .token(selectionToken))
        let digestBefore = try await DigestStoreTests.digest(store, "w")

        let dry = try await store.compact(before: horizon.position, dropBaked: false, dryRun: true)
        #expect(
            dry
                == CompactionReport(
                    previousHorizon: 0, horizon: horizon.position, droppedHidden: 1, droppedVersions: 3, keptFor: [], expiredBakes: [], dryRun: true))
        #expect(try await database.storedRecords("w")["c"] != nil, "a dry run changes nothing")
        let report = try await store.compact(before: horizon.position, dropBaked: false, dryRun: false)
        #expect(
            report
                == CompactionReport(
                    previousHorizon: 0, horizon: horizon.position, droppedHidden: 1, droppedVersions: 3, keptFor: [], expiredBakes: [], dryRun: false))

        guard case .rejected(.expired) = try await store.read(name("w"), since: .token(old)) else {
            throw TestFailure("a token before the horizon was honoured")
        }
        let plainAfter = try await store.read(name("w"), since: .token(horizon)).rows()
        #expect(plainAfter.rows == plainBefore.rows && plainAfter.token == plainBefore.token)
        let selectionAfter = try await Self.selectionAnswer(store, selection, since: .token(selectionToken))
        #expect(selectionAfter.rows == selectionBefore.rows && selectionAfter.token == selectionBefore.token)
        #expect(
            selectionAfter.rows.contains(Row(id: "a", hidden: true, body: #"{"id":"a","n":0}"#)), "a left the selection: its version at the horizon was kept")
        let stored = try await database.storedRecords("w")
        #expect(stored["c"] == nil, "the tombstone at the horizon is gone")
        #expect(stored["d"]?.hidden == true, "the tombstone after the horizon stays")
        #expect(try await DigestStoreTests.digest(store, "w") == digestBefore)
        // Compacting to an earlier position does not move the horizon back.
        #expect(try await store.compact(before: old.position, dropBaked: false, dryRun: false).horizon == horizon.position)
        try await store.close()
        await database.remove()
    }

    @Test("A recorded bake holds the horizon back unless dropped, and the report says which apps it affects", arguments: Backend.available)
    func bakesHoldTheHorizon(backend: Backend) async throws {
        try await backend.withStore { store, _ in
            let baked = try await put(store, "w", #"{"id":"a","n":1}"#).token
            try await store.recordBakes([(name("w"), baked)])
            try await put(store, "w", #"{"id":"a","n":2}"#)
            let latest = try await put(store, "w", #"{"id":"a","n":3}"#).token
            let bake = try #require(try await store.bakes().first)
            #expect(bake.entityTag == baked.entityTag && bake.position == baked.position)
            let kept = try await store.compact(before: latest.position, dropBaked: false, dryRun: false)
            #expect(kept.horizon == baked.position && kept.keptFor == [bake] && kept.expiredBakes.isEmpty)
            guard case .changes = try await store.read(name("w"), since: .token(baked)) else { throw TestFailure("the baked token was expired") }
            let dropped = try await store.compact(before: latest.position, dropBaked: true, dryRun: false)
            #expect(dropped.horizon == latest.position && dropped.expiredBakes == [bake])
            guard case .rejected(.expired) = try await store.read(name("w"), since: .token(baked)) else {
                throw TestFailure("the dropped bake's token still works")
            }
            #expect(try await store.bakes().isEmpty)
        }
    }

    @Test(
        "Compaction while writers write and a reader syncs: the reader, always at or after the horizon, keeps exact deltas and ends equal to the server (seeded)",
        arguments: Backend.available)
    func underLoad(backend: Backend) async throws {
        let seed = SeededGenerator.seed(for: "CompactionTests.underLoad(\(backend))")
        try await backend.withStore { store, _ in
            try await put(store, "w", #"{"id":"r0","n":0}"#)
            // A second writer commits to another collection throughout: positions and the write
            // lock are shared, so compactions interleave with its commits.
            try await put(store, "v", #"{"id":"x0","n":0}"#)
            let background = Task {
                for step in 0..<200 {
                    try await put(store, "v", #"{"id":"x\#(step % 7)","n":\#(step)}"#)
                    if step % 5 == 0 { _ = try? await store.write(to: name("v")) { try await $0.hide(id: "x\(step % 7)") } }
                }
            }
            func server() async throws -> [String: String] {
                guard case .changes(let full) = try await store.read(name("w"), since: .nothing) else { throw TestFailure("no full read") }
                return Dictionary(uniqueKeysWithValues: try await drain(full).map { ($0.id, $0.body) })
            }
            var random = SeededGenerator(seed: seed)
            var replica: [String: String] = [:]
            var token: Token?
            var compactions = 0
            func sync(_ round: Int) async throws {
                switch try await store.read(name("w"), since: token.map { .token($0) } ?? .nothing) {
                case .changes(let feed):
                    let mode = feed.mode
                    let rows = try await drain(feed)
                    if mode == .full { replica = [:] }
                    for row in rows { replica[row.id] = row.hidden ? nil : row.body }
                    token = feed.token
                case .notModified(let current, _): token = current
                case .rejected(let why): throw TestFailure("seed \(seed) round \(round): a reader at or after the horizon was told to reset (\(why))")
                }
            }
            for round in 0..<80 {
                for _ in 0..<(1 + random.next() % 3) {
                    let id = "r\(random.next() % 12)"
                    if random.next() % 3 == 0 {
                        _ = try? await store.write(to: name("w")) { try await $0.hide(id: id) }
                    } else {
                        try await put(store, "w", #"{"id":"\#(id)","n":\#(round)}"#)
                    }
                }
                if random.next() % 2 == 0 {
                    try await sync(round)
                    // Only this loop writes "w": the reader must equal it now.
                    #expect(replica == (try await server()), "seed \(seed) round \(round): the reader differs from the server")
                }
                // Compact up to the reader's token while newer hides and versions wait for it.
                if round % 8 == 4, let token {
                    _ = try await store.compact(before: token.position, dropBaked: false, dryRun: false)
                    compactions += 1
                }
            }
            try await background.value
            try await sync(999)
            #expect(compactions >= 9)
            #expect(replica == (try await server()), "seed \(seed): the reader differs from the server after \(compactions) compactions")
        }
    }
}

extension CompactionTests {
    @Test(
        "When a collection's newest record is hidden, compaction keeps it: the collection's token never moves back behind the horizon (found by seed 1111223990 of underLoad)",
        arguments: Backend.available)
    func newestTombstoneStays(backend: Backend) async throws {
        try await backend.withStore { store, _ in
            try await put(store, "w", #"{"id":"a"}"#, #"{"id":"b"}"#)
            let hid = try await store.write(to: name("w")) { try await $0.hide(id: "b") }.commit.token
            try await put(store, "v", #"{"id":"x"}"#)  // another collection moves the database head on
            let report = try await store.compact(before: hid.position, dropBaked: false, dryRun: false)
            #expect(report.horizon == hid.position && report.droppedHidden == 0)
            guard case .notModified(let current, _) = try await store.read(name("w"), since: .token(hid)) else {
                throw TestFailure("the token at the horizon is not current")
            }
            #expect(current == hid, "the collection's token moved from \(hid.position) to \(current.position)")
            guard case .notModified = try await store.read(name("w"), since: .token(current)) else {
                throw TestFailure("the token it answered is not honoured")
            }
        }
    }
}

import DeltaCore
import DeltaSQLite
import DeltaStore
import DeltaTestSupport
import Foundation
import Testing

@Suite("Several store instances on one database")
struct InstancesTests {
    @Test(
        "Concurrent writers on three instances: at every token a reader holds exactly the history up to its position",
        arguments: Backend.available)
    func exactUnderConcurrency(backend: Backend) async throws {
        let seed = SeededGenerator.seed(for: "InstancesTests.exactUnderConcurrency(\(backend))")
        let directory = URL(fileURLWithPath: try makeTemporaryDirectory("instances"))
        defer { try? FileManager.default.removeItem(at: directory) }
        let database = try await backend.makeDatabase(in: directory)
        // PostgreSQL: three instances, as three servers would have. SQLite: one process is one
        // instance (several in one process would block each other's threads on the file lock).
        var instances: [any ChangeStore] = [try await database.open()]
        for _ in 1..<3 { instances.append(backend == .sqlite ? instances[0] : try await database.open()) }
        let stores = instances
        let history = CommitLog()
        let collection = name("things")
        let writersDone = Locked(false)

        // Four writers, each on a random instance per commit, pausing inside their transactions
        // so that commits overlap; every write changes its record, so every commit takes a position.
        let observed = try await withThrowingTaskGroup(of: (writer: Bool, seen: [(UInt64, [String: String])]).self) { group in
            for writer in 0..<4 {
                group.addTask {
                    var random = SeededGenerator(seed: seed &+ UInt64(writer))
                    var mine: [String] = []
                    for commit in 0..<30 {
                        let store = stores[Int.random(in: 0..<stores.count, using: &random)]
                        var plan: [(id: String, hidden: Bool, body: String)] = []
                        for change in 0..<Int.random(in: 1...3, using: &random) {
                            let reuse = !mine.isEmpty && Bool.random(using: &random)
                            let id = reuse ? mine.randomElement(using: &random)! : "w\(writer)-\(commit)-\(change)"
                            if !reuse { mine.append(id) }
                            guard !plan.contains(where: { $0.id == id }) else { continue }
                            let hidden = reuse && Int.random(in: 0..<3, using: &random) == 0
                            plan.append((id, hidden, #"{"id":"\#(id)","v":"\#(writer).\#(commit).\#(change)"}"#))
                        }
                        let pauses = plan.map { _ in Int.random(in: 0...2, using: &random) }
                        let changes = plan
                        let commit = try await store.write(to: collection) { transaction in
                            for (change, pause) in zip(changes, pauses) {
                                var record = try record(change.body)
                                record.hidden = change.hidden
                                try await transaction.upsert(record)
                                if pause > 0 { try await Task.sleep(for: .milliseconds(pause)) }
                            }
                        }.commit
                        #expect(commit.committed, "seed \(seed)")
                        await history.record(position: commit.token.position, changes: changes)
                    }
                    return (true, [])
                }
            }
            // Three readers syncing by deltas from random instances until the writers are done.
            for reader in 0..<3 {
                group.addTask {
                    var random = SeededGenerator(seed: seed &+ 100 &+ UInt64(reader))
                    var model: [String: String] = [:]
                    var token: Token?
                    var seen: [(UInt64, [String: String])] = []
                    var finalRound = false
                    while true {
                        // SQLite reads do not suspend: pause, so that writers get the threads.
                        try await Task.sleep(for: .milliseconds(Int.random(in: 1...3, using: &random)))
                        let finished = writersDone.withLock { $0 }
                        let store = stores[Int.random(in: 0..<stores.count, using: &random)]
                        let result: ReadResult
                        do {
                            result = try await store.read(collection, since: token.map { .token($0) } ?? .nothing)
                        } catch let error as StoreError where error.kind == .notFound && token == nil {
                            if finalRound { return (false, seen) }
                            continue  // no writer has committed yet
                        }
                        switch result {
                        case .notModified(let current, _):
                            token = current
                        case .rejected(let reason):
                            throw TestFailure("seed \(seed): reader \(reader) was told to reset (\(reason)) at \(String(describing: token))")
                        case .changes(let feed):
                            // A lagging reader's delta may come back as the full dataset (more changed
                            // records than visible ones): that replaces the model, tombstones and all.
                            if feed.mode == .full { model = [:] }
                            for row in try await drain(feed) { model[row.id] = row.hidden ? nil : row.body }
                            token = feed.token
                            seen.append((feed.token.position, model))
                        }
                        if finalRound { return (false, seen) }
                        if finished { finalRound = true }
                    }
                }
            }
            var all: [(UInt64, [String: String])] = []
            var writersLeft = 4
            while let result = try await group.next() {
                if result.writer {
                    writersLeft -= 1
                    if writersLeft == 0 { writersDone.withLock { $0 = true } }
                } else {
                    all += result.seen
                }
            }
            return all
        }
        let positions = await history.commits.keys.sorted()
        #expect(positions == Array(1...UInt64(120)), "seed \(seed): positions are not 1…120 without gaps")
        for (position, model) in observed {
            let expected = await history.state(at: position)
            #expect(model == expected, "seed \(seed): a reader at position \(position) differs from the history")
        }
        #expect(observed.count > 3, "seed \(seed): the readers saw too few changes to prove anything")
        print(
            "InstancesTests.exactUnderConcurrency(\(backend)): seed \(seed): 120 commits by 4 writers on \(backend == .sqlite ? 1 : 3) instances, \(observed.count) reader states checked"
        )
        for store in stores { try? await store.close() }
        await database.remove()
    }

    @Test("Reopening keeps the records and the identity; a fixed identity is refused for a database that has another", arguments: Backend.available)
    func reopen(backend: Backend) async throws {
        let directory = URL(fileURLWithPath: try makeTemporaryDirectory("reopen"))
        defer { try? FileManager.default.removeItem(at: directory) }
        let database = try await backend.makeDatabase(in: directory)
        let store = try await database.open()
        let token = try await put(store, "widgets", #"{"id":"a"}"#).token
        let again = try await database.open()
        #expect(again.databaseID == store.databaseID)
        let rows = try await again.read(name("widgets"), since: .token(token))
        guard case .notModified(let current, _) = rows else { throw TestFailure("expected not modified, got \(rows)") }
        #expect(current == token)
        do {
            _ = try await database.open(newDatabaseID: store.databaseID &+ 1)
            Issue.record("opened with another identity")
        } catch let error as StoreError {
            #expect(error.kind == .incompatible)
            #expect(error.reason == "exists with another database identity")
        }
        try await again.close()
        try await store.close()
        await database.remove()
    }

    @Test("Every instance on one database, and every reopening, signs read grants with the same random key", arguments: Backend.available)
    func grantKey(backend: Backend) async throws {
        let directory = URL(fileURLWithPath: try makeTemporaryDirectory("grant-key"))
        defer { try? FileManager.default.removeItem(at: directory) }
        let database = try await backend.makeDatabase(in: directory)
        let first = try await database.open()
        let key = try await first.grantKey()
        #expect(key.count == 32 && Set(key).count > 8)
        #expect(try await first.grantKey() == key)
        try await first.close()
        let second = try await database.open()
        #expect(try await second.grantKey() == key)
        try await second.close()
        let other = try await backend.makeDatabase(in: URL(fileURLWithPath: try makeTemporaryDirectory("grant-key-other")))
        let elsewhere = try await other.open()
        #expect(try await elsewhere.grantKey() != key, "two databases share a grant key")
        try await elsewhere.close()
        await other.remove()
        await database.remove()
    }
}

import DeltaCore
import DeltaSQLite
import DeltaTestSupport
import Foundation
import Testing

@testable import DeltaClient

@Suite("Observation from the database: what a commit wrote wakes the live queries, whoever wrote it")
struct ChangeLogTests {
    @Test(
        "two Replica objects on one store, and the command line's ReplicaFiles: a write through any wakes the others' live queries, and only of that collection"
    )
    func writersInOneProcess() async throws {
        try await withHarness { harness in
            try await harness.put(#"{"id":"a","v":1}"#)
            let configuration = harness.configuration(snapshot: try await harness.bake("v1"))
            let app = try await Replica.open(configuration)
            let widget = try await Replica.open(configuration)
            let seen = Yields()
            let following = follow(widget, RecordQuery(items), into: seen)
            defer { following.cancel() }
            #expect(try await eventually { seen.count == 1 })
            // The app writes; the widget's live query (another object, its own connections) wakes.
            try await app.put(try Record(parsing: Array(#"{"id":"b","v":2}"#.utf8)), in: items)
            #expect(try await eventually { seen.last == [#"{"id":"a","v":1}"#, #"{"id":"b","v":2}"#] })
            // A tool's write through ReplicaFiles (as `deltasnap put` makes it) wakes it too.
            try ReplicaFiles(storeURL: configuration.storeURL).delete("a", in: items)
            #expect(try await eventually { seen.last == [#"{"id":"b","v":2}"#] })
            // A sync of the app (the server's row for "c") wakes the widget's query.
            try await harness.put(#"{"id":"c","v":3}"#)
            _ = try await app.sync()
            #expect(try await eventually { seen.last?.contains(#"{"id":"c","v":3}"#) == true })
            #expect(seen.count == 4, "one result per change: \(seen.values.withLock { $0 })")
        }
    }

    @Test(
        "the triggers note each collection's ids up to the limit, then only that it changed; a rollback takes its notes; a hub's quiet mark moves with each write"
    )
    func notes() throws {
        let connection = try Connection(path: ":memory:")
        try connection.execute("CREATE TABLE records(collection TEXT NOT NULL, id TEXT NOT NULL, body TEXT, PRIMARY KEY (collection, id)) WITHOUT ROWID")
        try connection.execute("CREATE TABLE sync_state(key TEXT PRIMARY KEY, value) WITHOUT ROWID")
        try ChangeLog.install(on: connection, tables: ["main.records"], store: "main")
        func write(_ sql: String) throws { try connection.transaction(.immediate) { try connection.execute(sql) } }
        try write("INSERT INTO records VALUES ('a', '1', '{}'), ('a', '2', '{}'), ('b', '1', '{}')")
        #expect(try ChangeLog.drain(connection) == ChangedRows(collections: ["a": .ids(["1", "2"]), "b": .ids(["1"])]))
        #expect(try ChangeLog.drain(connection) == .nothing)
        // An upsert (the statement's own conflict clause) and a delete are noted too.
        try write("INSERT INTO records VALUES ('a', '1', '[]') ON CONFLICT DO UPDATE SET body = excluded.body; DELETE FROM records WHERE collection = 'b'")
        #expect(try ChangeLog.drain(connection) == ChangedRows(collections: ["a": .ids(["1"]), "b": .ids(["1"])]))
        // Exactly the limit of writes keeps its ids; one more is `unknown`.
        let limit = ChangedRows.limit
        try write((0..<limit).map { "INSERT INTO records VALUES ('c', 'n\($0)', '{}');" }.joined())
        #expect(try ChangeLog.drain(connection) == ChangedRows(collections: ["c": .ids(Set((0..<limit).map { "n\($0)" }))]))
        try write("INSERT INTO records VALUES ('c', 'extra', '{}'); DELETE FROM records WHERE collection = 'c'; INSERT INTO records VALUES ('d', 'x', '{}')")
        #expect(try ChangeLog.drain(connection) == ChangedRows(collections: ["c": .unknown, "d": .ids(["x"])]))
        _ = try? connection.transaction(.immediate) {
            try connection.execute("INSERT INTO records VALUES ('e', '1', '{}')")
            throw CancellationError()
        }
        #expect(try ChangeLog.drain(connection) == .nothing)
        // A union keeps ids until the limit, then turns `unknown`; `everything` absorbs all.
        var changed = ChangedRows(collections: ["a": .ids(Set((0..<limit).map { "n\($0)" }))])
        changed.formUnion(ChangedRows(collections: ["a": .ids(["n0"]), "b": .ids(["z"])]))
        #expect(changed == ChangedRows(collections: ["a": .ids(Set((0..<limit).map { "n\($0)" })), "b": .ids(["z"])]))
        changed.formUnion(ChangedRows(collections: ["a": .ids(["other"])]))
        #expect(changed.rows(of: "a") == .unknown)
        changed.formUnion(.everything)
        #expect(changed.rows(of: "never written") == .unknown)

        // Each transaction that wrote rows counted itself once in `sync_state`, from a random start.
        let counts = try CommitCount.own(connection).store
        #expect(counts.count == 4, "\(counts)")
        #expect(zip(counts, counts.dropFirst()).allSatisfy { $0 + 1 == $1 })
        #expect(try connection.integer("SELECT value FROM sync_state WHERE key = 'commits'") == counts.last)
        #expect(try CommitCount.own(connection) == CommitCount.Own())
        try write("INSERT INTO sync_state VALUES ('other', 1)")  // no row a live query reads
        _ = try? connection.transaction(.immediate) {
            try connection.execute("INSERT INTO records VALUES ('e', '2', '{}')")
            throw CancellationError()
        }
        #expect(try CommitCount.own(connection) == CommitCount.Own())
        try write("DELETE FROM records WHERE collection = 'a'")  // deletes alone count too
        #expect(try CommitCount.own(connection).store == [counts.last! + 1])
        _ = try ChangeLog.drain(connection)

        let hub = ChangeHub.shared(for: URL(fileURLWithPath: "/nonexistent/notes-\(UUID())"))
        let before = try #require(hub.quietMark())
        try hub.writing(on: connection) {
            #expect(hub.quietMark() == nil, "a write under way leaves no quiet mark")
            try write("INSERT INTO records VALUES ('f', '1', '{}')")
        }
        #expect(hub.quietMark() != before)
        #expect(try ChangeLog.drain(connection) == .nothing, "the write's notes were published")
    }

    @Test("another process's writes (deltasnap put and delete on the same store) wake a live query within seconds")
    func anotherProcess() async throws {
        try await withHarness { harness in
            try await harness.put(#"{"id":"a","v":1}"#)
            let configuration = harness.configuration(snapshot: try await harness.bake("v1"))
            let replica = try await Replica.open(configuration)
            let seen = Yields()
            let following = follow(replica, RecordQuery(items), into: seen)
            defer { following.cancel() }
            #expect(try await eventually { seen.count == 1 })
            let store = configuration.storeURL.path
            var (status, _) = try await runDeltasnap(["put", "--store", store, "--collection", items], input: #"{"id":"b","v":2}"#)
            #expect(status == 0)
            #expect(try await eventually(.seconds(30)) { seen.last == [#"{"id":"a","v":1}"#, #"{"id":"b","v":2}"#] })
            (status, _) = try await runDeltasnap(["delete", "--store", store, "--collection", items, "a"])
            #expect(status == 0)
            #expect(try await eventually(.seconds(30)) { seen.last == [#"{"id":"b","v":2}"#] })
            // Our own writes move data_version too: they may cost a re-read, never a repeated result.
            try await replica.put(try Record(parsing: Array(#"{"id":"c","v":3}"#.utf8)), in: items)
            #expect(try await eventually { seen.last?.count == 2 && seen.last?.last == #"{"id":"c","v":3}"# })
            try await Task.sleep(for: .seconds(2.5))
            #expect(seen.count == 4, "one result per change: \(seen.values.withLock { $0 })")
        }
    }

    @Test(
        "another process's commit, then one of ours at once: the live query's next result holds both, never our row beside the other's old one (the files count their commits)"
    )
    func anotherProcessThenOurs() async throws {
        try await withHarness { harness in
            let (replica, configuration) = try await ourPutAfterAnother(harness) { round, configuration in
                let (status, _) = try await runDeltasnap(
                    ["put", "--store", configuration.storeURL.path, "--collection", items], input: #"{"id":"r1","v":\#(round)}"#)
                #expect(status == 0)
            }
            // Our own commits (puts through the outbox, a sync through the store) keep the hub's
            // count equal to the store's at once, without a look: patches go on (not whole reads).
            // A live query listens: the hub looks for other processes' commits only then.
            let following = follow(replica, RecordQuery(items), into: Yields())
            defer { following.cancel() }
            let hub = ChangeHub.shared(for: configuration.storeURL)
            #expect(try await eventually { hub.quietMark()?.commits == (try fileCounts(configuration)) })
            for step in 0..<4 {
                if step == 2 {
                    try await harness.put(#"{"id":"r3","v":9}"#)
                    _ = try await replica.sync()
                } else {
                    try await replica.put(try record(#"{"id":"r4","v":\#(step)}"#), in: items)
                }
                let store = try fileCounts(configuration)
                #expect(hub.quietMark()?.commits == store, "step \(step)")
            }
        }
    }

    @Test("during a sync (its pull stalled), an app's own put shows in a live query at once, not when the sync ends")
    func writeDuringSync() async throws {
        try await withHarness { harness in
            try await harness.put(#"{"id":"a","v":1}"#)
            let replica = try await Replica.open(harness.configuration(snapshot: try await harness.bake("v1"), viaProxy: true))
            let seen = Yields()
            let following = follow(replica, RecordQuery(items), into: seen)
            defer { following.cancel() }
            #expect(try await eventually { seen.count == 1 })
            harness.proxy.plan(.stall(.seconds(4)))
            let synced = Locked(false)
            let syncing = Task {
                _ = try await replica.sync()
                synced.withLock { $0 = true }
            }
            try await Task.sleep(for: .milliseconds(500))  // the sync holds the live queries' wake-ups now
            try await replica.put(try Record(parsing: Array(#"{"id":"b","v":2}"#.utf8)), in: items)
            #expect(try await eventually { seen.last == [#"{"id":"a","v":1}"#, #"{"id":"b","v":2}"#] })
            #expect(!synced.withLock { $0 }, "the put showed only once the sync had ended")
            try await syncing.value
        }
    }
}

extension ChangeLogTests {
    @Test(
        "on a full disk a put is kept exactly when it says it succeeded: a write of the outbox alone does not write the store file (each file counts its own commits)",
        .enabled(if: SmallFileSystem.available)
    )
    func fullDiskPutIsWhole() async throws {
        try await withHarness { harness in
            try await harness.putMany((0..<20).map { #"{"id":"a\#($0)"}"# })
            let snapshot = try await harness.bake("v1")
            let disk = try SmallFileSystem(megabytes: 8)
            defer { disk.unmount() }
            var configuration = harness.configuration(snapshot: snapshot)
            configuration.storeURL = disk.directory.appendingPathComponent("replica.sqlite")
            let replica = try await Replica.open(configuration)
            for index in 0..<5 {
                try await replica.put(try record(#"{"id":"warm\#(index)","pad":"\#(String(repeating: "p", count: 2000))"}"#), in: items)
            }
            // The outbox's log restarts at its next write (over space it has); the store's is emptied.
            let outbox = try Connection(path: ReplicaFiles.outboxURL(forStore: configuration.storeURL).path, mode: .readWrite)
            #expect(try outbox.integer("PRAGMA wal_checkpoint(RESTART)") == 0)
            let store = try Connection(path: configuration.storeURL.path, mode: .readWrite)
            #expect(try store.integer("PRAGMA wal_checkpoint(TRUNCATE)") == 0)
            let before = try fileCounts(configuration)
            _ = try disk.fill()
            var failure: ReplicaError?
            do { try await replica.put(try record(#"{"id":"NEW"}"#), in: items) } catch let error as ReplicaError { failure = error }
            let kept = try await replica.record("NEW", in: items)
            #expect((failure == nil) == (kept != nil), "the put said \(failure.map { "\($0)" } ?? "ok"), and its write was \(kept == nil ? "not " : "")kept")
            if let failure { #expect(failure.kind == .diskFull) }
            let after = try fileCounts(configuration)
            #expect(after.store == before.store, "a write of the outbox alone moved the store's count")
            #expect(after.outbox == before.outbox + (kept == nil ? 0 : 1))
        }
    }

    @Test("a Replica opening the store with a newer bundled snapshot: another object's live query never shows our row beside a replaced one")
    func openInstallIsCounted() async throws {
        try await withHarness { harness in
            let others = Locked<[Replica]>([])
            _ = try await ourPutAfterAnother(harness) { round, configuration in
                try await harness.put(#"{"id":"r1","v":\#(round)}"#)
                var newer = configuration
                newer.snapshotURL = try await harness.bake("v\(round)")
                // The app, updated with a newer bundled snapshot, opens the store: it installs it.
                let other = try await Replica.open(newer)
                others.withLock { $0.append(other) }
            }
            #expect(others.withLock { $0.count } == 3)
        }
    }
}

extension ChangeLogTests {
    @Test("the hub's counts equal the files' right after each of our own operations (no look needed)")
    func countsFollowOwnCommits() async throws {
        try await withHarness { harness in
            try await harness.put(#"{"id":"a","n":1}"#, #"{"id":"b","n":1}"#, #"{"id":"c","n":1}"#)
            let snapshot = try await harness.bake("v1")
            let one = try await Replica.open(harness.configuration("one", snapshot: snapshot))
            let configuration = harness.configuration("two", snapshot: snapshot)
            let two = try await Replica.open(configuration)
            let following = follow(two, RecordQuery(items), into: Yields())
            defer { following.cancel() }
            let hub = ChangeHub.shared(for: configuration.storeURL)
            #expect(try await eventually { hub.quietMark()?.commits == (try fileCounts(configuration)) })
            var mismatches: [String] = []
            func check(_ step: String) throws {
                let files = try fileCounts(configuration)
                let known = hub.quietMark()?.commits
                if known != files { mismatches.append(step) }
            }
            try await two.put(try record(#"{"id":"a","n":3}"#), in: items)
            try check("put")
            try await two.delete("b", in: items)
            try check("delete")
            _ = try await two.sync()
            try check("sync with push")
            // A conflict: one edits c on the server first.
            try await one.put(try record(#"{"id":"c","n":2,"by":"one"}"#), in: items)
            _ = try await one.sync()
            try await two.put(try record(#"{"id":"c","n":5,"by":"two"}"#), in: items)
            try check("put before conflict")
            let report = try await two.sync()
            #expect(report.pushed.conflicts.map(\.id) == ["c"])
            try check("sync with a conflict")
            try await two.resolve("c", in: items, .keepLocal)
            try check("resolve keepLocal")
            _ = try await two.sync()
            try check("sync after resolve")
            // A second Replica object on the same store (no install).
            let again = try await Replica.open(configuration)
            try check("second Replica open")
            try await again.put(try record(#"{"id":"d","n":1}"#), in: items)
            try check("second Replica put")
            // ReplicaFiles in this process (a new outbox connection).
            try ReplicaFiles(storeURL: configuration.storeURL).put([try record(#"{"id":"e","n":1}"#)], in: items)
            try check("ReplicaFiles put in process")
            try await two.signOut(discardingPendingWrites: true)
            try check("sign-out")
            try await two.put(try record(#"{"id":"f","n":1}"#), in: items)
            try check("put after sign-out")
            _ = try await two.sync()
            try check("sync after sign-out")
            #expect(mismatches.isEmpty, "the hub's counts differ from the files' after: \(mismatches)")
            _ = again
        }
    }

    @Test("a store and outbox whose counts are missing (written by an older build) open at once while another connection holds the store's write lock")
    func openWaitsForStoreLock() async throws {
        try await withHarness { harness in
            try await harness.put(#"{"id":"a","n":1}"#)
            let configuration = harness.configuration(snapshot: try await harness.bake("v1"))
            do { _ = try await Replica.open(configuration) }
            // An older build's files: no counts.
            let store = try Connection(path: configuration.storeURL.path, mode: .readWrite)
            try store.execute("DELETE FROM sync_state WHERE key = 'commits'")
            let outbox = try Connection(path: ReplicaFiles.outboxURL(forStore: configuration.storeURL).path, mode: .readWrite)
            try outbox.execute("DELETE FROM meta WHERE key = 'commits'")
            // Another process (an older app, a long reset) holds the store's write lock.
            try store.execute("BEGIN IMMEDIATE")
            let started = ContinuousClock.now
            _ = try ReplicaFiles(storeURL: configuration.storeURL)  // what `deltasnap status`, `conflicts`, `put` open
            let filesTook = ContinuousClock.now - started
            let started2 = ContinuousClock.now
            let opened = try await Replica.open(configuration)
            let replicaTook = ContinuousClock.now - started2
            // The store's count was not written (its lock was held), and no open waited out the
            // 10 s busy timeout for it (each waited 10 s before; the bound leaves room for a
            // loaded machine).
            #expect(try store.integer("SELECT count(*) FROM sync_state WHERE key = 'commits'") == 0)
            try store.execute("ROLLBACK")
            #expect(filesTook < .seconds(8), "ReplicaFiles open waited \(filesTook) for the store's write lock")
            #expect(replicaTook < .seconds(8), "Replica.open waited \(replicaTook) for the store's write lock")
            _ = opened
        }
    }
}

/// Both files' counts of commits, as a new reader of the replica sees them.
private func fileCounts(_ configuration: ReplicaConfiguration) throws -> CommitCount.Counts {
    try CommitCount.read(ReplicaFiles.readerConnection(configuration.storeURL))
}

/// Three rounds over a new replica whose live query follows all of `items` (50 records): `other`
/// changes r1 to `{"v": round}` behind the replica's back, then the replica puts r2 at once; the
/// first result that shows the replica's r2 must show the other's r1 too (a patch over a commit no
/// one told it of would keep r1's old value).
private func ourPutAfterAnother(
    _ harness: Harness, other: (_ round: Int, _ configuration: ReplicaConfiguration) async throws -> Void
) async throws -> (Replica, ReplicaConfiguration) {
    try await harness.putMany((0..<50).map { #"{"id":"r\#($0)","v":0}"# })
    let configuration = harness.configuration(snapshot: try await harness.bake("v0"))
    let replica = try await Replica.open(configuration)
    let seen = Yields()
    let following = follow(replica, RecordQuery(items), into: seen)
    defer { following.cancel() }
    #expect(try await eventually { seen.count == 1 })
    // Let the hub's first look (which wakes every live query) pass.
    try await Task.sleep(for: .milliseconds(300))
    for round in 1...3 {
        try await other(round, configuration)
        try await replica.put(try record(#"{"id":"r2","v":\#(round)}"#), in: items)
        #expect(try await eventually { seen.last?.contains(#"{"id":"r2","v":\#(round)}"#) == true })
        let first = seen.values.withLock { $0.first { $0.contains(#"{"id":"r2","v":\#(round)}"#) } }
        #expect(first?.contains(#"{"id":"r1","v":\#(round)}"#) == true, "round \(round): our row r2 shows beside r1's old value")
    }
    return (replica, configuration)
}

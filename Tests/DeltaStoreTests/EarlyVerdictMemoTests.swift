import DeltaCore
import DeltaSQLite
import DeltaSQLiteStore
import DeltaStore
import DeltaTestSupport
import Foundation
import Testing

/// The SQLite store's early `304`s remembered per thread while the write-ahead log's index header
/// is unchanged (`WALIndex`, `EarlyVerdictMemo`): never a `304` after a commit that ended before
/// the question was asked, whoever committed.
@Suite("Early verdicts remembered until the next commit")
struct EarlyVerdictMemoTests {
    /// A SQLite store whose `widgets` holds one record: `body` gets the store, its file's path,
    /// the collection's token, and the store's early `304` since a token (`earlyNotModified`).
    private func withWidget(
        _ body: @escaping @Sendable (SQLiteStore, String, Token, (Token) -> Token?) async throws -> Void
    ) async throws {
        try await Backend.sqlite.withStore { store, directory in
            let sqlite = try #require(store as? SQLiteStore)
            let token = try await put(store, "widgets", #"{"id":"a"}"#).token
            try await body(sqlite, directory.appendingPathComponent("store.sqlite").path, token) { earlyNotModified(sqlite, since: $0) }
        }
    }

    @Test("The remembered not-modified verdict ends with any commit: this store's, or one from another connection to the file")
    func notModifiedMemo() async throws {
        try await withWidget { store, path, token, early in
            // Every early reader answers (and remembers) the verdict; a commit elsewhere keeps it true.
            for _ in 0..<4 { #expect(early(token) == token) }
            try await put(store, "other", #"{"id":"x"}"#)
            for _ in 0..<4 { #expect(early(token) == token) }
            // A commit to the collection through this store.
            let second = try await put(store, "widgets", #"{"id":"b"}"#).token
            for _ in 0..<4 { #expect(early(token) == nil) }
            for _ in 0..<4 { #expect(early(second) == second) }
            // A commit through another store on the same file (as `deltasnap import` beside a running server).
            let other = try SQLiteStore(path: path)
            try await put(other, "widgets", #"{"id":"c"}"#)
            try await other.close()
            for _ in 0..<4 { #expect(early(second) == nil) }
        }
    }

    @Test(
        "The log index's header stays while nothing commits and is new after every commit: this store's, another connection's, another process's, after a truncating checkpoint"
    )
    func headerMovesWithEveryCommit() async throws {
        try await Backend.sqlite.withStore { store, directory in
            let path = directory.appendingPathComponent("store.sqlite").path
            let index = try WALIndex(path: path)
            var seen: [WALIndex.Header] = []
            func header() throws -> WALIndex.Header { try #require(index.header(), "no writer is between the two copies here") }
            func expectNew(_ what: String) throws {
                let now = try header()
                #expect(!seen.contains(now), "the header after \(what) was seen before")
                seen.append(now)
            }
            #expect(index.header() != nil, "the store moved a rebuilt header's counter on when it opened: watched from the start")
            try await put(store, "widgets", #"{"id":"a"}"#)
            try expectNew("the first commit")
            // Reads commit nothing.
            for _ in 0..<20 { _ = try await store.read(name("widgets"), since: .nothing).rows() }
            #expect(try header() == seen.last)
            for n in 0..<30 {
                try await put(store, "widgets", #"{"id":"r\#(n)"}"#)
                try expectNew("commit \(n) through the store")
            }
            let other = try SQLiteStore(path: path)
            try await put(other, "widgets", #"{"id":"other"}"#)
            try await other.close()
            try expectNew("a commit through another store on the file")
            let file = directory.appendingPathComponent("one.ndjson")
            try Data(#"{"id":"imported"}"#.utf8 + [10]).write(to: file)
            let imported = try await runProgram(try deltasnapExecutable(), ["import", "--db", path, "--collection", "widgets", file.path])
            #expect(imported.status == 0, "\(imported.printed)")
            try expectNew("deltasnap import in another process")
            let connection = try Connection(path: path)
            #expect(try connection.integer("PRAGMA wal_checkpoint(TRUNCATE)") == 0, "the checkpoint was not blocked")
            try await put(store, "widgets", #"{"id":"after-checkpoint"}"#)
            try expectNew("a commit into the restarted log")
        }
    }

    @Test(
        "A store opening a database no other connection has open moves the rebuilt header's change counter on, so its early verdicts are remembered from the start"
    )
    func watchedFromTheStart() async throws {
        let directory = try makeTemporaryDirectory("wal-index-start")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/store.sqlite"
        func changeCounter() throws -> UInt32 {
            let bytes = try #require(FileManager.default.contents(atPath: path + "-shm"))
            return bytes[8..<12].withUnsafeBytes { $0.loadUnaligned(as: UInt32.self) }
        }
        do {
            let first = try SQLiteStore(path: path)
            try await put(first, "widgets", #"{"id":"a"}"#)
            try await first.close()
        }
        // Every connection closed: the next one to open rebuilds the index, its counter at 0.
        let reader = try Connection(path: path)
        #expect(try reader.integer("SELECT count(*) FROM records") == 1)
        #expect(try changeCounter() == 0, "SQLite rebuilt the header")
        let store = try SQLiteStore(path: path)
        #expect(try changeCounter() != 0, "the store moved the counter on when it opened")
        try await store.close()
    }

    @Test("A header SQLite rebuilt (a writer killed between its two copies) is not trusted until the next commit, and verdicts stay right meanwhile")
    func rebuiltHeaderIsNotTrusted() async throws {
        try await withWidget { store, path, token, early in
            for _ in 0..<4 { #expect(early(token) == token) }
            let index = try WALIndex(path: path)
            let before = try #require(index.header())
            // Both copies of the header zeroed: the next reader finds no whole header and rebuilds it from the log.
            let shm = try #require(FileHandle(forUpdatingAtPath: path + "-shm"))
            try shm.seek(toOffset: 0)
            try shm.write(contentsOf: Data(count: 96))
            try shm.close()
            #expect(index.header() == nil, "a zeroed header is not whole")
            let reader = try Connection(path: path)
            #expect(try reader.integer("SELECT count(*) FROM records") == 1)
            #expect(index.header() == nil, "a rebuilt header, whose change counter is 0, is not trusted")
            for _ in 0..<4 { #expect(early(token) == token) }
            let second = try await put(store, "widgets", #"{"id":"b"}"#).token
            for _ in 0..<4 { #expect(early(token) == nil) }
            for _ in 0..<4 { #expect(early(second) == second) }
            let after = try #require(index.header(), "a commit moves the counter on")
            #expect(after != before)
        }
    }

    @Test("Early verdicts asked on two threads while commits run never say not modified since a token that a finished commit superseded")
    func neverStaleAcrossThreads() async throws {
        try await Backend.sqlite.withStore { store, _ in
            let sqlite = try #require(store as? SQLiteStore)
            let widgets = name("widgets")
            // The newest token whose commit has returned, and the one before it.
            let tokens = Locked((previous: Token?.none, latest: try await put(store, "widgets", #"{"id":"w0"}"#).token))
            let done = Locked(false)
            let stale = Locked([String]())
            let asked = Locked(0)
            let threads = (0..<2).map { thread in
                let finished = DispatchSemaphore(value: 0)
                Thread.detachNewThread {
                    var seen: Token?
                    while !done.withLock({ $0 }) {
                        // Read before asking: the commit after `previous` ended before this question.
                        let (previous, latest) = tokens.withLock { ($0.previous, $0.latest) }
                        // One round per commit: a thread spinning meanwhile would take a core from the tests beside it.
                        guard latest != seen else {
                            usleep(300)
                            continue
                        }
                        seen = latest
                        if let previous, case .notModified = sqlite.earlyVerdict(widgets, since: .token(previous)) {
                            stale.withLock { $0.append("thread \(thread): not modified since \(previous), superseded by \(latest)") }
                        }
                        // The current token, asked again and again, fills the thread's memo.
                        for _ in 0..<3 { _ = sqlite.earlyVerdict(widgets, since: .token(latest)) }
                        asked.withLock { $0 += 4 }
                    }
                    finished.signal()
                }
                return finished
            }
            for n in 1...150 {
                // Every other commit is to another collection: the memo must end then too, and stay right.
                if n.isMultiple(of: 2) { try await put(store, "others", #"{"id":"o\#(n)"}"#) }
                let token = try await put(store, "widgets", #"{"id":"w\#(n)"}"#).token
                tokens.withLock { $0 = (previous: $0.latest, latest: token) }
                try await Task.sleep(for: .milliseconds(2))
            }
            done.withLock { $0 = true }
            for finished in threads { try await offThePool { finished.wait() } }
            let found = stale.withLock { $0 }
            #expect(found.count == 0, "\(found.count) stale answers, the first: \(found.prefix(3))")
            #expect(asked.withLock { $0 } > 400, "the threads asked too little to show anything")
        }
    }
}

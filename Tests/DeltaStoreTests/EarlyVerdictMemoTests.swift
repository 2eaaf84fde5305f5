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
            _ = try connection.text("PRAGMA wal_checkpoint(TRUNCATE)")
            try await put(store, "widgets", #"{"id":"after-checkpoint"}"#)
            try expectNew("a commit into the restarted log")
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
                    while !done.withLock({ $0 }) {
                        // Read before asking: the commit after `previous` ended before this question.
                        let (previous, latest) = tokens.withLock { ($0.previous, $0.latest) }
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
            for finished in threads {
                await withCheckedContinuation { continuation in
                    DispatchQueue.global().async {
                        finished.wait()
                        continuation.resume()
                    }
                }
            }
            let found = stale.withLock { $0 }
            #expect(found.count == 0, "\(found.count) stale answers, the first: \(found.prefix(3))")
            #expect(asked.withLock { $0 } > 600, "the threads asked too little to show anything")
        }
    }
}

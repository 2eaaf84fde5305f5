import DeltaSQLite
import DeltaTestSupport
import Foundation
import Testing

@testable import DeltaClient

/// Reads nested in reads on the same thread (a `ReplicaReader.record` inside a `forEachRecord`
/// body): they must never wait for the outer reads they are inside of.
@Suite("Replica: a read inside another read")
struct ReaderPoolNestingTests {
    /// A pool of `capacity` connections to a fresh database in `directory`.
    static func pool(_ directory: String, capacity: Int) throws -> ReaderPool {
        let path = directory + "/store.sqlite"
        let first = try Connection(path: path)
        try first.execute("PRAGMA journal_mode=WAL")
        try first.execute("CREATE TABLE IF NOT EXISTS t(x)")
        return ReaderPool(first: first, capacity: capacity) { try Connection(path: path) }
    }

    /// Starts `body` on `count` threads at once; the group ends when all have returned.
    static func onThreads(_ count: Int, _ body: @escaping @Sendable (Int) -> Void) -> DispatchGroup {
        let done = DispatchGroup()
        for index in 0..<count {
            done.enter()
            Thread.detachNewThread {
                body(index)
                done.leave()
            }
        }
        return done
    }

    @Test("every connection held by an outer read, each nests two more levels: all end, and the extra connections close")
    func nestedBeyondCapacity() throws {
        let directory = try makeTemporaryDirectory("reader-nesting")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let pool = try Self.pool(directory, capacity: 2)
        let (holding, go) = (DispatchSemaphore(value: 0), DispatchSemaphore(value: 0))
        let nested = Locked(0)
        let done = Self.onThreads(2) { _ in
            do {
                try pool.read { outer in
                    _ = try outer.integer("SELECT count(*) FROM t")
                    holding.signal()
                    go.wait()  // both connections are held by outer reads now
                    try pool.read { inner in
                        _ = try inner.integer("SELECT count(*) FROM t")
                        try pool.read { innermost in
                            _ = try innermost.integer("SELECT 1")
                            nested.withLock { $0 += 1 }
                        }
                    }
                }
            } catch {
                Issue.record("a read failed: \(error)")
            }
        }
        holding.wait()
        holding.wait()
        go.signal()
        go.signal()
        #expect(done.wait(timeout: .now() + 20) == .success, "nested reads waited for the outer reads they were inside of")
        #expect(nested.withLock { $0 } == 2)
        #expect(pool.openCount == 2, "the connections opened beyond the capacity were not closed (\(pool.openCount) open)")
    }

    @Test("a read nested inside one that an exclusive holder (a sign-out) waits for ends, and so does the holder")
    func nestedWhileExclusiveWaits() throws {
        let directory = try makeTemporaryDirectory("reader-nesting")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let pool = try Self.pool(directory, capacity: 3)
        let holding = DispatchSemaphore(value: 0)
        let exclusiveWaiting = DispatchSemaphore(value: 0)
        let order = Locked([String]())
        let done = Self.onThreads(2) { index in
            if index == 0 {
                try? pool.read { _ in
                    holding.signal()
                    exclusiveWaiting.wait()
                    Thread.sleep(forTimeInterval: 0.05)  // the holder is waiting inside `exclusively` by now
                    try pool.read { inner in
                        _ = try inner.integer("SELECT 1")
                        order.withLock { $0.append("nested") }
                    }
                }
            } else {
                holding.wait()
                exclusiveWaiting.signal()
                pool.exclusively { order.withLock { $0.append("exclusive") } }
            }
        }
        #expect(done.wait(timeout: .now() + 20) == .success, "the nested read and the exclusive holder waited for each other")
        #expect(order.withLock { $0 } == ["nested", "exclusive"])
    }
}

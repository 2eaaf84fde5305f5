import DeltaCore
import DeltaEventLoops
import DeltaStore
import DeltaTestSupport
import NIOCore
import NIOPosix
import Testing

@Suite("Stores on event loops")
struct EventLoopExecutorTests {
    @Test("A task preferring an event loop's executor resumes on that loop after every await, store calls included", arguments: Backend.available)
    func resumesOnTheLoop(backend: Backend) async throws {
        guard #available(macOS 15.0, *) else { return }
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let loop = group.next()
        try await backend.withStore { store, _ in
            #expect(store.runsOnEventLoops == (backend == .postgres), "only PostgreSQL's calls never block their thread")
            let collection = try CollectionName("things")
            let outcomes = try await withTaskExecutorPreference(EventLoopExecutor(loop)) {
                var onLoop = [loop.inEventLoop]
                try await Task.sleep(for: .milliseconds(5))
                onLoop.append(loop.inEventLoop)
                _ = try await store.write(to: collection) { try await $0.upsert(try Record(parsing: Array(#"{"id":"a"}"#.utf8))) }
                onLoop.append(loop.inEventLoop)
                _ = try await store.read(collection, since: .nothing)
                onLoop.append(loop.inEventLoop)
                return onLoop
            }
            #expect(outcomes == [true, true, true, true])
            #expect(!loop.inEventLoop)
        }
        try await group.shutdownGracefully()
    }

    @Test("A pool hands out the idle connection the caller prefers, else the newest idle one")
    func preferredConnection() async throws {
        let pool = ConnectionPool<Int>(maximum: 3) { 0 }
        for connection in [1, 2, 3] { pool.adopt(connection) }
        #expect(try await pool.checkout(preferring: { $0 == 1 }) == 1)
        #expect(try await pool.checkout(preferring: { $0 == 9 }) == 3)
        #expect(try await pool.checkout() == 2)
    }
}

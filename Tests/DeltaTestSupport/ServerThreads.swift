import Foundation
import Hummingbird
import HummingbirdTesting

/// Threads of its own for one in-process server, the way a `deltasnap serve` process has its
/// own: a task executor its request handling prefers.
///
/// Swift's global executor has one thread per core and never takes a thread back from a job
/// that keeps it. Every test runs in parallel on those two threads here, with every in-process
/// server: a test that loads a dump, checks a model, or imports thousands of rows on them for
/// seconds holds up every other test's server, and their clients time out (CI saw 15 to 20 s
/// `readTimeout`s, always of in-process servers). On threads of its own, a server shares the
/// cores the way separate processes do: the kernel gives each thread its turn.
///
/// Structured child tasks inherit the preference (Hummingbird's connections are child tasks of
/// the server's); `Task {}` and `Task.detached` do not, nor do actors with executors of their own.
public final class ServerThreads: TaskExecutor, @unchecked Sendable {
    private let condition = NSCondition()
    private var jobs: [UnownedJob] = []
    private var next = 0
    private var closed = false

    /// Starts `count` threads named `name`.
    public init(_ count: Int = 2, name: String = "test-server") {
        for index in 0..<count {
            let thread = Thread { [self] in
                // Named from inside: on Linux, Foundation names only the thread it runs on.
                Thread.current.name = "\(name)-\(index)"
                self.work()
            }
            thread.stackSize = 8 << 20
            thread.start()
        }
    }

    /// Queues a job for the next free thread; once closed, runs it on a thread of its own.
    public func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        condition.lock()
        if closed {
            condition.unlock()
            // A job enqueued after the scope ended (a task that outlived it): never dropped.
            let thread = Thread { [self] in
                Thread.current.name = "late-server-job"
                job.runSynchronously(on: self.asUnownedTaskExecutor())
            }
            thread.stackSize = 8 << 20
            thread.start()
            return
        }
        jobs.append(job)
        condition.signal()
        condition.unlock()
    }

    /// Lets the threads end once the queue is empty.
    public func close() {
        condition.lock()
        closed = true
        condition.broadcast()
        condition.unlock()
    }

    private func work() {
        while let job = take() { job.runSynchronously(on: asUnownedTaskExecutor()) }
    }

    private func take() -> UnownedJob? {
        condition.lock()
        defer { condition.unlock() }
        while next == jobs.count {
            if closed { return nil }
            condition.wait()
        }
        let job = jobs[next]
        next += 1
        if next > 1024 && next * 2 > jobs.count {
            jobs.removeFirst(next)
            next = 0
        }
        return job
    }
}

/// Runs `server` with its tasks preferring threads of their own (see ``ServerThreads``); the
/// test's own code inside it goes back to the global executor with ``offServerThreads(_:)``.
public func onServerThreads<T: Sendable>(
    _ count: Int = 2, _ server: () async throws -> T
) async throws -> T {
    let threads = ServerThreads(count)
    defer { threads.close() }
    return try await withTaskExecutorPreference(threads) { try await server() }
}

/// Runs a test's body, called inside ``onServerThreads(_:_:)``, on the global executor again:
/// a body that keeps a thread busy then holds up only what the global executor runs, not its
/// server.
public func offServerThreads<T: Sendable>(_ body: () async throws -> T) async throws -> T {
    try await withTaskExecutorPreference(globalConcurrentExecutor) { try await body() }
}

extension ApplicationProtocol {
    /// `test(.live)` with the server on threads of its own and `test` on the global executor: a
    /// live server that behaves like a process of its own (see ``ServerThreads``).
    public func testOnServerThreads<Value: Sendable>(
        _ testingSetup: TestingSetup = .live,
        _ test: @escaping @Sendable (any TestClientProtocol) async throws -> Value
    ) async throws -> Value {
        try await onServerThreads {
            try await self.test(testingSetup) { client in try await offServerThreads { try await test(client) } }
        }
    }
}

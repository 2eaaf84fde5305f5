import Foundation

/// Runs long synchronous work (parsing a large file, an SQLite transaction that fsyncs, a
/// blocking `poll` or `recv`) on a thread of its own.
///
/// Swift's global executor has one thread per core: on a two-core machine a test that parses a
/// real CSV dump on it for seconds leaves one thread to every in-process server of every other
/// test, and their clients time out (seen as 15 to 20 s `readTimeout`s, always of SQLite servers:
/// PostgreSQL's requests run on their event loops). On Linux that executor is Dispatch's default
/// root queue, so `DispatchQueue.global()` is no way out: the work would still hold one of the
/// same threads. A thread of its own only shares the cores, as the kernel schedules it.
public func offThePool<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        let thread = Thread { continuation.resume(with: Result { try work() }) }
        thread.stackSize = 8 << 20
        thread.start()
    }
}

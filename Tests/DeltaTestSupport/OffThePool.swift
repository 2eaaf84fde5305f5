import Dispatch

/// Runs long synchronous work (parsing a large file, a blocking call) on a dispatch thread.
///
/// Swift's cooperative pool has one thread per core: on a two-core machine a test that parses
/// a real CSV dump on it for seconds leaves one thread to every in-process server of every
/// other test, and their clients time out (seen as 20 s `readTimeout`s with PostgreSQL idle in
/// transaction, waiting for the process). Tests do their heavy synchronous work here instead.
public func offThePool<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        DispatchQueue.global().async { continuation.resume(with: Result { try work() }) }
    }
}

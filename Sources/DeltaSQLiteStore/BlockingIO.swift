import Dispatch

/// File system calls that can block for long (writes the kernel throttles while it writes back,
/// `fsync` of a large file) run on a dispatch thread, not on one of Swift's cooperative threads:
/// a server has as many of those as cores, and every request waits for one. A blob's `fsync`
/// holding one for seconds on a two-core machine stalled all the other requests behind it.
enum BlockingIO {
    /// Runs `work` on a dispatch thread and returns its result.
    static func run<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            DispatchQueue.global(qos: .userInitiated).async { continuation.resume(with: Result { try work() }) }
        }
    }
}

import Foundation

/// Runs blocking SQLite or file work on a global dispatch queue, so that neither the caller's
/// thread (the main thread, say) nor Swift's cooperative pool waits on the disk.
func background<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        DispatchQueue.global(qos: .userInitiated).async { continuation.resume(with: Result { try work() }) }
    }
}

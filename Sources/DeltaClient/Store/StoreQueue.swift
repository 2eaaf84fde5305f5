import DeltaSQLite
import Foundation

/// Runs blocking SQLite and file work on the replica's own serial queue, off Swift's
/// cooperative thread pool; the `ReplicaDatabase` is only ever touched there.
final class StoreQueue: @unchecked Sendable {
    private let queue = DispatchQueue(label: "DeltaClient.store")
    private var database: ReplicaDatabase
    private let changes: ChangeHub

    /// The queue of `database`, whose commits wake the live queries of `changes` (`ChangeLog`).
    init(_ database: ReplicaDatabase, changes: ChangeHub) throws {
        self.database = database
        self.changes = changes
        try ChangeLog.install(on: database.connection, tables: ["main.records"], store: "main")
    }

    /// Runs `work` on the queue; `isCancelled` turns true when the calling task is cancelled.
    func run<T: Sendable>(_ work: @escaping @Sendable (ReplicaDatabase, _ isCancelled: () -> Bool) throws -> T) async throws -> T {
        let cancelled = Locked(false)
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                queue.async {
                    // A SQLite failure leaves as a replica error (`.diskFull` when out of space),
                    // never as SQLite's own.
                    continuation.resume(
                        with: Result {
                            do {
                                return try self.changes.writing(on: self.database.connection) {
                                    try work(self.database) { cancelled.withLock { $0 } }
                                }
                            } catch let error as SQLiteError {
                                throw ReplicaError("the local store failed", storing: error, path: self.database.path)
                            }
                        })
                }
            }
        } onCancel: {
            cancelled.withLock { $0 = true }
        }
    }

    /// Runs `work` on the queue and waits for it, from synchronous code.
    func runNow<T>(_ work: (ReplicaDatabase) throws -> T) throws -> T {
        try queue.sync {
            try changes.writing(on: database.connection) { try work(database) }
        }
    }
}

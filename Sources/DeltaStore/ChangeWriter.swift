public import DeltaCore

/// The store as writes and pushes see it (`WriteRoutes`, `Push`, `deltasnap import`): one write
/// transaction per call, committed as one position or not at all. A backend implements it as
/// part of `ChangeStore`.
public protocol ChangeWriter: Sendable {
    /// Runs `body` as one write transaction on `collection`: all of it commits as one position, or none.
    ///
    /// Writes that change nothing (same content, same hidden state) take no position; when
    /// nothing changes at all, no commit is made and the result says so.
    func write<T: Sendable>(
        to collection: CollectionName, _ body: (any WriteTransaction) async throws -> T
    ) async throws -> (value: T, commit: CommitResult)

}

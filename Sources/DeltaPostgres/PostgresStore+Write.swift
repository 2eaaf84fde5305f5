public import DeltaCore
public import DeltaStore
import Foundation
import PostgresNIO

extension PostgresStore {
    /// Runs `body` as one write, committed as one position if anything changed: on its own, or
    /// in a group with the writes this instance receives meanwhile (`PostgresWriteGroup`).
    public func write<T: Sendable>(
        to collection: CollectionName, _ body: (any WriteTransaction) async throws -> T
    ) async throws -> (value: T, commit: CommitResult) {
        let group: PostgresWriteGroup
        switch await writeGroups.enter() {
        case .lead(let led):
            group = led
            do {
                try await begin(group)
            } catch {
                group.failToBegin(error)
                throw error
            }
        case .member(let joined, .run): group = joined
        case .member(_, .failed(let error)): throw error
        case .member(_, .closed): preconditionFailure("PostgresWriteGroups.enter returned a closed group")
        }
        // The turn is ours: run on the group's transaction, then pass it on or commit.
        let outcome: Result<(T, CommitResult), any Error>
        do {
            outcome = .success(try await onConnectionLoop(group) { try await member(of: group, collection, body) })
        } catch {
            outcome = .failure(error)
        }
        if let next = group.passTurn() {
            next.resume(returning: .run)
            let (value, result) = try outcome.get()
            if let failure = await group.awaitCommit() { throw failure }
            return (value, result)
        }
        let failure = await onConnectionLoop(group) { await commit(group) }
        group.finish(failure)
        let (value, result) = try outcome.get()
        if let failure { throw failure }
        return (value, result)
    }

    /// Runs `body` on the event loop of the group's connection (`EventLoopExecutor`): each of
    /// the group's statements then resumes its task where PostgreSQL's answer is read, with no
    /// wake-up of another thread inside the write lock.
    private func onConnectionLoop<R: Sendable>(_ group: PostgresWriteGroup, _ body: () async throws -> R) async rethrows -> R {
        guard #available(macOS 15.0, *), let loop = group.connection?.eventLoop else { return try await body() }
        return try await withTaskExecutorPreference(EventLoopExecutor(loop)) { try await body() }
    }

    /// Begins a group's transaction: a writer connection, then the write lock and the head in
    /// one statement (`PostgresWriteGroup.headFunction`).
    private func begin(_ group: PostgresWriteGroup) async throws {
        let connection = try await writers.checkout()
        do {
            if writeGroups.sweep(connection) { try await execute(connection, "TRUNCATE pg_temp.written") }
            try await execute(connection, "BEGIN")
            for try await row in try await query(connection, "SELECT * FROM deltasnap.write_head(\(Self.writeLock))") {
                let (position, tag) = try row.decode((Int64, Int64).self)
                group.head = (UInt64(clamping: position), UInt32(truncatingIfNeeded: tag))
            }
        } catch {
            await release(connection, to: writers, failed: true)
            throw failure(error)
        }
        group.connection = connection
    }

    /// Runs one write of `group`, taking the position after the group's head.
    ///
    /// A savepoint is set only before the write's first statement that writes while its body
    /// runs (`PostgresWriteTransaction.beforeWriting`): a body that fails after it rolls back to
    /// it. Most writes (a `PUT`, a `DELETE` that finds nothing to hide) only read until their
    /// body has returned, and write in `finish`; when such a body fails, the transaction is
    /// checked (a failed read aborts it). A failure that leaves the transaction unusable, or
    /// with part of a write in it, breaks the group: its commit then fails for every write in it.
    private func member<T: Sendable>(
        of group: PostgresWriteGroup, _ collection: CollectionName, _ body: (any WriteTransaction) async throws -> T
    ) async throws -> (T, CommitResult) {
        guard let connection = group.connection else { preconditionFailure("a write group's turn before its transaction began") }
        if let broken = group.broken { throw broken }
        group.members += 1
        let transaction = PostgresWriteTransaction(connection: connection, collection: collection, store: self, group: group)
        do {
            let value: T
            do {
                value = try await body(transaction)
            } catch {
                // The body's own errors (bad input, say) pass through as they are; the
                // transaction's database errors are already `StoreError`s.
                throw BodyFailure(error: error)
            }
            let result = try await transaction.finish()
            if result.committed {
                group.head = (result.token.position, result.token.commit)
                group.commits.append(PostgresWriteGroup.Commit(collection: collection, token: result.token, at: Int64(Date().timeIntervalSince1970)))
                group.changes[collection, default: StateChange()].add(transaction.stateChange)
            }
            return (value, result)
        } catch {
            await undo(transaction, in: group, connection)
            if let failure = error as? BodyFailure { throw failure.error }
            throw failure(error)
        }
    }

    /// Takes a failed write out of its group's transaction: back to its savepoint, or, without
    /// one, a check that the transaction still answers; else the group is broken. PostgreSQL
    /// answers `COMMIT` on an aborted transaction with a rollback, not an error, so a group
    /// must never commit after a failure it has not healed.
    private func undo(_ transaction: PostgresWriteTransaction, in group: PostgresWriteGroup, _ connection: PostgresConnection) async {
        do {
            if let savepoint = transaction.savepoint {
                try await execute(connection, "ROLLBACK TO SAVEPOINT \(savepoint)")
            } else if transaction.wroteUnprotected {
                throw StoreError(.unavailable, "store \(location)", "a write failed after it changed rows outside a savepoint")
            } else {
                try await execute(connection, "SELECT 1")
            }
        } catch {
            group.broken = failure(error)
        }
    }

    /// Commits `group`: its commit rows and each collection's state digest, then `COMMIT`; gives
    /// the connection back. Returns nil once the commit is durable, else why it failed (nothing
    /// of the group is kept).
    private func commit(_ group: PostgresWriteGroup) async -> (any Error)? {
        guard let connection = group.connection else { preconditionFailure("a write group commits before its transaction began") }
        do {
            if let broken = group.broken { throw broken }
            if !group.commits.isEmpty { try await addCommits(connection, group) }
            try await execute(connection, "COMMIT")
        } catch {
            await release(connection, to: writers, failed: true)
            return failure(error)
        }
        writeGroups.noteClaims(group.claimedRows, on: connection)
        writers.checkin(connection)
        return nil
    }
}

/// An error the write's body threw, to pass through unchanged.
private struct BodyFailure: Error {
    let error: any Error
}

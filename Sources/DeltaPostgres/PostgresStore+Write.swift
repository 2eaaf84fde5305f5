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
        // The turn is ours: run on the group's transaction, then pass it on or commit. Every
        // write, failed ones too, answers only once the group's commit has ended: a failed
        // write's answer (a `412` showing a version, say) may rest on the writes before it.
        let outcome: Result<(T, CommitResult), any Error>
        do {
            outcome = .success(try await member(of: group, collection, body))
        } catch {
            outcome = .failure(error)
        }
        let failure: (any Error)?
        if let next = group.passTurn() {
            next.resume(returning: .run)
            failure = await group.awaitCommit()
        } else {
            // Shielded from the caller's cancellation: a `COMMIT` that ran but whose answer was
            // not read would be reported as failed to every write of the group.
            failure = await Task { await commit(group) }.value
            group.finish(failure)
        }
        if let failure {
            // A failed write's decision rested on a state that never committed: its answer too
            // is the group's failure.
            throw failure
        }
        return try outcome.get()
    }

    /// Begins a group's transaction: a writer connection, then the write lock and the head in
    /// one statement (`PostgresWriteGroup.headFunction`).
    private func begin(_ group: PostgresWriteGroup) async throws {
        let connection = try await writers.checkout()
        do {
            if writeGroups.sweep(connection) { try await execute(connection, "TRUNCATE pg_temp.written") }
            try await beginLocked(group, connection)
        } catch {
            await release(connection, to: writers, failed: true)
            throw failure(error)
        }
        group.connection = connection
    }

    /// Runs one write of `group`, taking the position after the group's head.
    ///
    /// Every write after the group's first sets a savepoint before its first statement, and a
    /// failure rolls back to it: the writes before it stay, and those after it go on. The first
    /// write needs none: nothing else is in the transaction yet, so its failure rolls the
    /// transaction back and begins it again (`restart`). A failure that cannot be undone breaks
    /// the group: its commit then fails for every write in it. PostgreSQL answers `COMMIT` on an
    /// aborted transaction with a rollback, not an error, so a group never commits after a
    /// failure it has not undone.
    private func member<T: Sendable>(
        of group: PostgresWriteGroup, _ collection: CollectionName, _ body: (any WriteTransaction) async throws -> T
    ) async throws -> (T, CommitResult) {
        guard let connection = group.connection else { preconditionFailure("a write group's turn before its transaction began") }
        if let broken = group.broken { throw broken }
        let first = group.members == 0
        group.members += 1
        let transaction = PostgresWriteTransaction(connection: connection, collection: collection, store: self, group: group)
        // Sent without waiting for its answer: PostgreSQL answers it just before the write's first
        // statement, which postgres-nio sends behind it, so it costs no round trip of its own.
        // Its answer is read before the write counts as done; should it have failed, so does
        // everything after it, and the rollback to it: the group breaks.
        let savepoint: EventLoopFuture<PostgresQueryResult>? =
            first ? nil : connection.query(PostgresQuery(unsafeSQL: "SAVEPOINT \(transaction.savepoint)"), logger: logger)
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
            _ = try await savepoint?.get()
            if result.committed {
                group.head = (result.token.position, result.token.commit)
                group.commits.append(PostgresWriteGroup.Commit(collection: collection, token: result.token, at: Int64(Date().timeIntervalSince1970)))
                group.changes[collection, default: StateChange()].add(transaction.stateChange)
            }
            return (value, result)
        } catch {
            // Shielded from the caller's cancellation, which fails statements' answers.
            let undone: (any Error)? = await Task {
                do {
                    _ = try await savepoint?.get()
                    if first {
                        try await restart(group, connection)
                    } else {
                        try await execute(connection, "ROLLBACK TO SAVEPOINT \(transaction.savepoint)")
                    }
                    return nil
                } catch {
                    return failure(error)
                }
            }.value
            if let undone { group.broken = undone }
            if let failure = error as? BodyFailure { throw failure.error }
            throw failure(error)
        }
    }

    /// Rolls back a group's transaction after its first write failed, and begins it again, with
    /// the lock and the head: nothing else had run in it.
    private func restart(_ group: PostgresWriteGroup, _ connection: PostgresConnection) async throws {
        try await execute(connection, "ROLLBACK")
        try await beginLocked(group, connection)
        group.members = 0
        group.claimedRows = 0
    }

    /// `BEGIN`, then the write lock and the head in one statement (`PostgresWriteGroup.headFunction`).
    private func beginLocked(_ group: PostgresWriteGroup, _ connection: PostgresConnection) async throws {
        try await execute(connection, "BEGIN")
        for try await row in try await query(connection, "SELECT * FROM deltasnap.write_head(\(Self.writeLock))") {
            let (position, tag) = try row.decode((Int64, Int64).self)
            group.head = (UInt64(clamping: position), UInt32(truncatingIfNeeded: tag))
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
            // PostgreSQL answers `COMMIT` in an aborted transaction with `ROLLBACK`, not an error.
            let commit: EventLoopFuture<PostgresQueryResult> = connection.query(PostgresQuery(unsafeSQL: "COMMIT"), logger: logger)
            let ended = try await commit.get()
            guard ended.metadata.command == "COMMIT" else {
                throw StoreError(.unavailable, "store \(location)", "the write group's commit was rolled back", evidence: ended.metadata.command)
            }
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

public import DeltaCore
public import DeltaStore
import Foundation
import PostgresNIO

extension PostgresStore {
    /// Runs `body` as one transaction that holds the write lock from its start; commits one
    /// position if anything changed.
    ///
    /// The lock is taken by its own statement before the head is read: in READ COMMITTED each
    /// statement sees what was committed when it started, and PostgreSQL makes a commit visible
    /// before it releases that commit's locks, so the head read after the lock is the newest.
    public func write<T: Sendable>(
        to collection: CollectionName, _ body: (any WriteTransaction) async throws -> T
    ) async throws -> (value: T, commit: CommitResult) {
        let connection = try await writers.checkout()
        do {
            try await execute(connection, "BEGIN")
            try await execute(connection, "SELECT pg_advisory_xact_lock(\(Self.writeLock))")
            var head: (position: UInt64, tag: UInt32) = (0, 0)
            for try await row in try await query(connection, "SELECT position, tag FROM deltasnap.commits ORDER BY position DESC LIMIT 1") {
                let (position, tag) = try row.decode((Int64, Int64).self)
                head = (UInt64(clamping: position), UInt32(truncatingIfNeeded: tag))
            }
            let transaction = PostgresWriteTransaction(connection: connection, collection: collection, store: self, head: head)
            let value: T
            do {
                value = try await body(transaction)
            } catch {
                // The body's own errors (bad input, say) pass through as they are; the
                // transaction's database errors are already `StoreError`s.
                throw BodyFailure(error: error)
            }
            let result = try await transaction.finish()
            try await execute(connection, "COMMIT")
            writers.checkin(connection)
            return (value, result)
        } catch {
            await release(connection, to: writers, failed: true)
            if let failure = error as? BodyFailure { throw failure.error }
            throw failure(error)
        }
    }
}

/// An error the write's body threw, to pass through unchanged.
private struct BodyFailure: Error {
    let error: any Error
}

/// The writes of one PostgreSQL transaction; used by one task, then finished.
final class PostgresWriteTransaction: WriteTransaction, @unchecked Sendable {
    let connection: PostgresConnection
    let collection: CollectionName
    let store: PostgresStore
    let head: (position: UInt64, tag: UInt32)
    private var changed = false
    private var upserted = 0
    private var hidden = 0
    private var unchanged = 0
    private var finished = false
    private var chain = CommitChain()
    /// What this commit does to the collection's state digest and visible count: new visible versions in, old ones out.
    private var stateChange = StateChange()

    init(connection: PostgresConnection, collection: CollectionName, store: PostgresStore, head: (position: UInt64, tag: UInt32)) {
        self.connection = connection
        self.collection = collection
        self.store = store
        self.head = head
    }

    /// The position this commit takes if anything changes.
    var position: Int64 { Int64(head.position + 1) }

    /// Upserts wait here and go to the database in one statement per batch.
    private var pending: [Record] = []
    private var pendingIDs: Set<String> = []
    /// Records per statement: large enough that round trips stop mattering, small enough to bound memory.
    static let batchSize = 1_000

    func upsert(_ record: Record) async throws {
        precondition(!finished, "WriteTransaction used after its commit")
        guard pendingIDs.insert(record.id).inserted else { throw writtenTwice(record.id) }
        pending.append(record)
        if pending.count >= Self.batchSize { try await flush() }
    }

    /// Sends the pending upserts.
    private func flush() async throws {
        guard !pending.isEmpty else { return }
        let batch = pending
        pending.removeAll(keepingCapacity: true)
        pendingIDs.removeAll(keepingCapacity: true)
        var binds = PostgresBindings(capacity: 5)
        binds.append(collection.rawValue)
        binds.append(batch.map(\.id))
        binds.append(batch.map(\.hidden))
        binds.append(batch.map { ByteBuffer(bytes: $0.body) })
        binds.append(position)
        var changed: [Int] = []
        do {
            for try await row in try await store.query(connection, Self.upsertSQL, binds) {
                let (n, replaced) = try row.decode((Int64, ByteBuffer?).self)
                changed.append(Int(n) - 1)
                if let replaced { try stateChange.remove(element: PostgresStore.element(replaced)) }
            }
        } catch {
            throw claimFailure(error)
        }
        unchanged += batch.count - changed.count
        guard !changed.isEmpty else { return }
        try await keepBlobReferences(changed.lazy.map { batch[$0] })
        try noteChange()
        for index in changed {
            let record = batch[index]
            chain.add(collection: collection, id: record.id, hidden: record.hidden, body: record.body)
            if record.hidden {
                hidden += 1
            } else {
                upserted += 1
                stateChange.add(body: record.body)
            }
        }
    }

    func hide(id: String) async throws -> Bool {
        precondition(!finished, "WriteTransaction used after its commit")
        try await flush()
        var binds = PostgresBindings(capacity: 3)
        binds.append(collection.rawValue)
        binds.append(id)
        binds.append(position)
        var (exists, hid): (Bool, ByteBuffer?) = (false, nil)
        do {
            for try await row in try await store.query(connection, Self.hideSQL, binds) { (exists, hid) = try row.decode((Bool, ByteBuffer?).self) }
        } catch {
            throw claimFailure(error)
        }
        guard exists else { throw StoreError(.notFound, "record \(String(reflecting: id)) in \(collection)", "does not exist") }
        guard let hid else {
            unchanged += 1
            return false
        }
        try stateChange.remove(element: PostgresStore.element(hid))
        try noteChange()
        chain.add(collection: collection, id: id, hidden: true, body: [])
        hidden += 1
        return true
    }

    func hideUnwritten() async throws -> Int {
        precondition(!finished, "WriteTransaction used after its commit")
        try await flush()
        var binds = PostgresBindings(capacity: 2)
        binds.append(collection.rawValue)
        binds.append(position)
        let sql = """
            UPDATE deltasnap.records r SET hidden = true, position = $2
            WHERE collection = $1 AND NOT hidden AND NOT EXISTS (SELECT 1 FROM pg_temp.written w WHERE w.id = r.id)
            RETURNING id, sha256(body)
            """
        var ids: [[UInt8]] = []
        do {
            for try await row in try await store.query(connection, sql, binds) {
                let (id, hash) = try row.decode((String, ByteBuffer).self)
                ids.append(Array(id.utf8))
                try stateChange.remove(element: PostgresStore.element(hash))
            }
        } catch {
            throw store.failure(error)
        }
        guard !ids.isEmpty else { return 0 }
        try noteChange()
        // In id order, by bytes, as the SQLite store hashes them: the same writes, the same tag.
        for id in ids.sorted(by: { $0.lexicographicallyPrecedes($1) }) {
            chain.add(collection: collection, id: String(decoding: id, as: UTF8.self), hidden: true, body: [])
        }
        hidden += ids.count
        return ids.count
    }

    /// A second write to one id in one commit is refused: which one should win would be a guess.
    private func writtenTwice(_ id: String) -> StoreError {
        StoreError(.invalidWrite, "record \(String(reflecting: id)) in \(collection)", "written twice in one commit")
    }

    /// A failed claiming statement as a `StoreError`: a unique violation (23505) on the table of
    /// claimed ids names the id written twice in its detail, `Key (id)=(ID) already exists.`
    private func claimFailure(_ error: any Error) -> any Error {
        guard PostgresStore.sqlState(error) == "23505", let detail = (error as? PSQLError)?.serverInfo?[.detail] else {
            return store.failure(error)
        }
        guard detail.hasPrefix("Key (id)=("), let end = detail.range(of: ") already exists", options: .backwards) else {
            return StoreError(.invalidWrite, "a record in \(collection)", "written twice in one commit", evidence: detail)
        }
        return writtenTwice(String(detail[detail.index(detail.startIndex, offsetBy: 10)..<end.lowerBound]))
    }

    /// The first change takes the position, which must not pass the clock.
    private func noteChange() throws {
        if !changed { _ = try CommitChain.nextPosition(after: head.position) }
        changed = true
    }

    /// Records the commit (when anything changed) and returns the result.
    func finish() async throws -> CommitResult {
        try await flush()
        finished = true
        let token: Token
        if changed {
            let next = head.position + 1
            let tag = chain.tag(previous: head.tag, position: next)
            var binds = PostgresBindings(capacity: 3)
            binds.append(Int64(next))
            binds.append(Int64(tag))
            binds.append(Int64(Date().timeIntervalSince1970))
            for try await _ in try await store.query(connection, "INSERT INTO deltasnap.commits(position, tag, committed_at) VALUES ($1, $2, $3)", binds) {}
            try await store.addDigest(connection, collection, stateChange)
            token = Token(database: store.databaseID, position: next, commit: tag)
        } else {
            token = try await store.collectionToken(connection, collection) ?? Token(database: store.databaseID, position: 0, commit: 0)
        }
        return CommitResult(token: token, committed: changed, upserted: upserted, hidden: hidden, unchanged: unchanged)
    }
}

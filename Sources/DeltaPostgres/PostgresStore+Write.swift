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
            let value = try await body(transaction)
            let result = try await transaction.finish()
            try await execute(connection, "COMMIT")
            writers.checkin(connection)
            return (value, result)
        } catch {
            await release(connection, to: writers, failed: true)
            throw failure(error)
        }
    }
}

/// The writes of one PostgreSQL transaction; used by one task, then finished.
final class PostgresWriteTransaction: WriteTransaction, @unchecked Sendable {
    private let connection: PostgresConnection
    private let collection: CollectionName
    private let store: PostgresStore
    private let head: (position: UInt64, tag: UInt32)
    private var changed = false
    private var upserted = 0
    private var hidden = 0
    private var unchanged = 0
    private var finished = false
    private var chain = CommitChain()

    init(connection: PostgresConnection, collection: CollectionName, store: PostgresStore, head: (position: UInt64, tag: UInt32)) {
        self.connection = connection
        self.collection = collection
        self.store = store
        self.head = head
    }

    /// The position this commit takes if anything changes.
    private var position: Int64 { Int64(head.position + 1) }

    /// One statement: claim the id for this commit, then insert, or update only when the content
    /// or the hidden state differs. A row comes back only when something changed.
    private static let upsertSQL = """
        WITH claim AS (INSERT INTO pg_temp.written(id) VALUES ($2))
        INSERT INTO deltasnap.records AS r (collection, id, position, hidden, body) VALUES ($1, $2, $3, $4, $5)
        ON CONFLICT (collection, id) DO UPDATE SET position = excluded.position, hidden = excluded.hidden, body = excluded.body
        WHERE r.hidden <> excluded.hidden OR r.body <> excluded.body
        RETURNING 1
        """

    func upsert(_ record: Record) async throws -> Bool {
        precondition(!finished, "WriteTransaction used after its commit")
        var binds = PostgresBindings(capacity: 5)
        binds.append(collection.rawValue)
        binds.append(record.id)
        binds.append(position)
        binds.append(record.hidden)
        binds.append(ByteBuffer(bytes: record.body))
        let changedNow = try await claiming(record.id) {
            var any = false
            for try await _ in try await store.query(connection, Self.upsertSQL, binds) { any = true }
            return any
        }
        guard changedNow else {
            unchanged += 1
            return false
        }
        try noteChange()
        chain.add(collection: collection, id: record.id, hidden: record.hidden, body: record.body)
        if record.hidden { hidden += 1 } else { upserted += 1 }
        return true
    }

    /// Claims the id, hides the record if it is visible, and says whether it exists at all
    /// (the outer query sees the table as it was before the statement).
    private static let hideSQL = """
        WITH claim AS (INSERT INTO pg_temp.written(id) VALUES ($2)),
        changed AS (
            UPDATE deltasnap.records SET hidden = true, position = $3
            WHERE collection = $1 AND id = $2 AND NOT hidden RETURNING 1)
        SELECT EXISTS (SELECT 1 FROM deltasnap.records WHERE collection = $1 AND id = $2), EXISTS (SELECT 1 FROM changed)
        """

    func hide(id: String) async throws -> Bool {
        precondition(!finished, "WriteTransaction used after its commit")
        var binds = PostgresBindings(capacity: 3)
        binds.append(collection.rawValue)
        binds.append(id)
        binds.append(position)
        let (exists, hid) = try await claiming(id) { () async throws -> (Bool, Bool) in
            for try await row in try await store.query(connection, Self.hideSQL, binds) { return try row.decode((Bool, Bool).self) }
            return (false, false)
        }
        guard exists else { throw StoreError(.notFound, "record \(String(reflecting: id)) in \(collection)", "does not exist") }
        guard hid else {
            unchanged += 1
            return false
        }
        try noteChange()
        chain.add(collection: collection, id: id, hidden: true, body: [])
        hidden += 1
        return true
    }

    func hideUnwritten() async throws -> Int {
        precondition(!finished, "WriteTransaction used after its commit")
        var binds = PostgresBindings(capacity: 2)
        binds.append(collection.rawValue)
        binds.append(position)
        let sql = """
            UPDATE deltasnap.records r SET hidden = true, position = $2
            WHERE collection = $1 AND NOT hidden AND NOT EXISTS (SELECT 1 FROM pg_temp.written w WHERE w.id = r.id)
            RETURNING id
            """
        var ids: [[UInt8]] = []
        for try await row in try await store.query(connection, sql, binds) { ids.append(Array(try row.decode(String.self).utf8)) }
        guard !ids.isEmpty else { return 0 }
        try noteChange()
        // In id order, by bytes, as the SQLite store hashes them: the same writes, the same tag.
        for id in ids.sorted(by: { $0.lexicographicallyPrecedes($1) }) {
            chain.add(collection: collection, id: String(decoding: id, as: UTF8.self), hidden: true, body: [])
        }
        hidden += ids.count
        return ids.count
    }

    /// Runs a statement that claims `id`, refusing a second write to it in one commit: which one
    /// should win would be a guess.
    private func claiming<T>(_ id: String, _ body: () async throws -> T) async throws -> T {
        do {
            return try await body()
        } catch let error as StoreError where error.evidence?.hasPrefix("23505 ") == true {
            throw StoreError(.invalidWrite, "record \(String(reflecting: id)) in \(collection)", "written twice in one commit")
        }
    }

    /// The first change takes the position, which must not pass the clock.
    private func noteChange() throws {
        if !changed { _ = try CommitChain.nextPosition(after: head.position) }
        changed = true
    }

    /// Records the commit (when anything changed) and returns the result.
    func finish() async throws -> CommitResult {
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
            token = Token(database: store.databaseID, position: next, commit: tag)
        } else {
            token = try await store.collectionToken(connection, collection) ?? Token(database: store.databaseID, position: 0, commit: 0)
        }
        return CommitResult(token: token, committed: changed, upserted: upserted, hidden: hidden, unchanged: unchanged)
    }
}

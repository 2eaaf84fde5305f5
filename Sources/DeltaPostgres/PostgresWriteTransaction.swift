import DeltaCore
import DeltaStore
import Foundation
import PostgresNIO

/// One write of a group's PostgreSQL transaction (`PostgresWriteGroup`), taking the position after
/// the group's head; used by one task, then finished.
final class PostgresWriteTransaction: WriteTransaction, @unchecked Sendable {
    let connection: PostgresConnection
    let collection: CollectionName
    let store: PostgresStore
    /// The group this write runs in: the head before it, the commits before it in the group.
    let group: PostgresWriteGroup
    /// The newest position and its tag when this write began.
    let head: (position: UInt64, tag: UInt32)
    /// This write's key in the table of ids claimed (`pg_temp.written`), used by no other write
    /// of this process. Not its position: a write that changes nothing leaves its claims and its
    /// position to the next write, and claims outlive their transaction.
    let claim: Int64
    /// The name of this write's savepoint (the group sets one for every write after its first).
    var savepoint: String { "w\(claim)" }
    private var changed = false
    private var upserted = 0
    private var hidden = 0
    private var unchanged = 0
    private var finished = false
    private var chain = CommitChain()
    /// What this commit does to the collection's state digest and visible count: new visible
    /// versions in, old ones out. The group adds it to the stored digest when it commits.
    private(set) var stateChange = StateChange()

    init(connection: PostgresConnection, collection: CollectionName, store: PostgresStore, group: PostgresWriteGroup) {
        self.connection = connection
        self.collection = collection
        self.store = store
        self.group = group
        head = group.head
        claim = store.writeGroups.nextClaim()
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
        let statement = Upsert(
            collection: collection.rawValue, ids: batch.map(\.id), hidden: batch.map(\.hidden), bodies: batch.map { ByteBuffer(bytes: $0.body) },
            position: position, claim: claim)
        group.claimedRows += batch.count
        var changed: [Int] = []
        do {
            for try await (n, replaced) in try await connection.execute(statement, logger: store.logger) {
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
        var (exists, hid): (Bool, ByteBuffer?) = (false, nil)
        group.claimedRows += 1
        do {
            for try await row in try await connection.execute(
                Hide(collection: collection.rawValue, id: id, position: position, claim: claim), logger: store.logger)
            {
                (exists, hid) = row
            }
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
        var binds = PostgresBindings(capacity: 3)
        binds.append(collection.rawValue)
        binds.append(position)
        binds.append(claim)
        let sql = """
            UPDATE deltasnap.records r SET hidden = true, position = $2
            WHERE collection = $1 AND NOT hidden AND NOT EXISTS (SELECT 1 FROM pg_temp.written w WHERE w.claim = $3 AND w.id = r.id)
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
    /// claimed ids names the id written twice in its detail,
    /// `Key (claim, id)=(CLAIM, ID) already exists.`
    private func claimFailure(_ error: any Error) -> any Error {
        guard PostgresStore.sqlState(error) == "23505", let detail = (error as? PSQLError)?.serverInfo?[.detail] else {
            return store.failure(error)
        }
        let prefix = "Key (claim, id)=(\(claim), "
        guard detail.hasPrefix(prefix), let end = detail.range(of: ") already exists", options: .backwards),
            end.lowerBound >= detail.index(detail.startIndex, offsetBy: prefix.count)
        else {
            return StoreError(.invalidWrite, "a record in \(collection)", "written twice in one commit", evidence: detail)
        }
        return writtenTwice(String(detail[detail.index(detail.startIndex, offsetBy: prefix.count)..<end.lowerBound]))
    }

    /// The first change takes the position, which must not pass the clock.
    private func noteChange() throws {
        if !changed { _ = try CommitChain.nextPosition(after: head.position) }
        changed = true
    }

    /// Sends what is left and returns the result: when anything changed, the commit's token
    /// (its row is written when the group commits, `PostgresStore.addCommits`); else the
    /// collection's current token, the group's newest commit to it when it has one.
    func finish() async throws -> CommitResult {
        try await flush()
        finished = true
        let token: Token
        if changed {
            let next = head.position + 1
            token = Token(database: store.databaseID, position: next, commit: chain.tag(previous: head.tag, position: next))
        } else if let newest = group.commits.last(where: { $0.collection == collection }) {
            token = newest.token
        } else {
            token = try await store.collectionToken(connection, collection) ?? Token(database: store.databaseID, position: 0, commit: 0)
        }
        return CommitResult(token: token, committed: changed, upserted: upserted, hidden: hidden, unchanged: unchanged)
    }
}

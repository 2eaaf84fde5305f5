public import DeltaCore
import DeltaEventLoops
public import DeltaStore
import PostgresNIO

extension PostgresStore {
    /// Answers a read. A verdict alone is one statement, so one snapshot, and needs no
    /// transaction: `304`s and rejections cost one round trip, shared by every read waiting for
    /// one (`VerdictBatch`). A feed re-reads the verdict inside
    /// a REPEATABLE READ transaction and streams from that same snapshot, so its token describes
    /// exactly the records it returns. A `client`'s last mutation id is read in that transaction
    /// too (so a client's reads always take it).
    public func read(_ collection: CollectionName, since: Since, client: String?) async throws -> (result: ReadResult, lastMutation: UInt64?) {
        if client == nil, since != .nothing, let result = try await quickVerdict(collection, since) { return (result, nil) }
        // A small delta is one statement (PostgresPublicOpening); anything else, a transaction.
        if let answered = try await PostgresPublicOpening.read(self, collection, since: since, client: client) { return answered }
        let connection = try await checkoutReader()
        do {
            try await beginRead(connection)
            let verdict = try await evaluate(connection, collection, since)
            let last = try await lastMutation(connection, client)
            switch verdict {
            case .answer(let result):
                try await PostgresReadTransaction.commit(connection, logger: logger)
                readers.checkin(connection)
                return (result, last)
            case .stream(let token, let mode, let digest):
                var binds = PostgresBindings(capacity: 2)
                binds.append(collection.rawValue)
                let sql: String
                switch mode {
                case .full:
                    sql = "SELECT hidden, body FROM deltasnap.records WHERE collection = $1 AND NOT hidden ORDER BY id"
                case .delta(let since):
                    binds.append(Int64(since))
                    sql = "SELECT hidden, body FROM deltasnap.records WHERE collection = $1 AND position > $2 ORDER BY position, id"
                }
                let rows = try await query(connection, sql, binds)
                return (.changes(PostgresChangeFeed(connection: connection, rows: rows, token: token, mode: mode, digest: digest, store: self)), last)
            }
        } catch {
            await release(connection, to: readers, failed: true)
            throw failure(error)
        }
    }

    /// `client`'s last mutation id (0 before its first push), read in the open transaction; nil without a client.
    func lastMutation(_ connection: PostgresConnection, _ client: String?) async throws -> UInt64? {
        guard let client else { return nil }
        var binds = PostgresBindings(capacity: 1)
        binds.append(client)
        for try await row in try await query(connection, "SELECT last_mutation FROM deltasnap.push_clients WHERE client = $1", binds) {
            return UInt64(clamping: try row.decode(Int64.self))
        }
        return 0
    }

    /// Everything a verdict needs, in one statement: the database head, the horizon, the
    /// collection's newest position and its tag, the tag at the position asked about, the
    /// collection's digest and visible count, and (when asked) how many records changed since.
    private static let verdictSQL = """
        SELECT (SELECT coalesce(max(position), 0) FROM deltasnap.commits),
               (SELECT value::bigint FROM deltasnap.meta WHERE key = 'horizon'),
               (SELECT max(position) FROM deltasnap.records WHERE collection = $1),
               (SELECT tag FROM deltasnap.commits WHERE position = (SELECT max(position) FROM deltasnap.records WHERE collection = $1)),
               (SELECT tag FROM deltasnap.commits WHERE position = $2),
               (SELECT digest FROM deltasnap.digests WHERE collection = $1),
               (SELECT records FROM deltasnap.digests WHERE collection = $1),
               CASE WHEN $3 THEN (SELECT count(*) FROM deltasnap.records WHERE collection = $1 AND position > $2) END
        """

    /// Reads the facts for a verdict on `since` and decides it; without `counting`, the changed
    /// records are not counted, so a delta is never switched to a full answer (selections, and
    /// the first look that only answers verdicts without records).
    func evaluate(_ connection: PostgresConnection, _ collection: CollectionName, _ since: Since, counting: Bool = true) async throws -> ReadVerdict {
        var binds = PostgresBindings(capacity: 3)
        binds.append(collection.rawValue)
        binds.append(Int64(clamping: ReadVerdict.askedPosition(since)))
        binds.append(counting && ReadVerdict.askedPosition(since) > 0)
        var facts = ReadVerdict.Facts(head: 0, horizon: 0, collectionHead: nil, collectionTag: nil, askedTag: nil, digest: .empty)
        for try await row in try await query(connection, Self.verdictSQL, binds) {
            let (head, horizon, collectionHead, collectionTag, askedTag, stored, visible, changed) = try row.decode(
                (Int64, Int64?, Int64?, Int64?, Int64?, ByteBuffer?, Int64?, Int64?).self)
            facts = try Self.facts(
                (head, horizon, collectionHead, collectionTag, askedTag, stored, visible), changed: changed, of: collection.rawValue,
                store: location.description)
        }
        return try ReadVerdict.decide(collection, since: since, database: databaseID, facts: facts, store: location.description)
    }

    /// A verdict row's columns: head, horizon, the collection's head and its tag, the asked
    /// position's tag, the stored digest, the visible count.
    typealias VerdictColumns = (Int64, Int64?, Int64?, Int64?, Int64?, ByteBuffer?, Int64?)

    /// The facts of one verdict row (`verdictSQL`, or a row of the shared statement).
    static func facts(_ row: VerdictColumns, changed: Int64?, of collection: String, store: String) throws -> ReadVerdict.Facts {
        let (head, horizon, collectionHead, collectionTag, askedTag, stored, visible) = row
        var digest = StateDigest.empty
        if let stored {
            guard let parsed = StateDigest(bytes: Array(stored.readableBytesView)) else {
                throw StoreError(.corrupt, "digest of \(collection)", "is not 32 bytes", evidence: "store \(store)")
            }
            digest = parsed
        }
        return ReadVerdict.Facts(
            head: UInt64(clamping: head), horizon: horizon.map { UInt64(clamping: $0) } ?? 0,
            collectionHead: collectionHead.map { UInt64(clamping: $0) },
            collectionTag: collectionTag.map { UInt32(truncatingIfNeeded: $0) }, askedTag: askedTag.map { UInt32(truncatingIfNeeded: $0) },
            digest: digest, visible: Int(visible ?? 0), changed: changed.map { Int($0) })
    }

    /// The token of the collection's newest change, or nil when it has no records.
    func collectionToken(_ connection: PostgresConnection, _ collection: CollectionName) async throws -> Token? {
        do {
            switch try await evaluate(connection, collection, .nothing) {
            case .stream(let token, _, _): return token
            case .answer: return nil
            }
        } catch let error as StoreError where error.kind == .notFound {
            return nil
        }
    }

    /// Opens a read's REPEATABLE READ transaction on `connection`.
    func beginRead(_ connection: PostgresConnection) async throws {
        do {
            try await PostgresReadTransaction.begin(connection, logger: logger)
        } catch {
            throw failure(error)
        }
    }

    /// Ends the read transaction on `connection` in a task of its own, on the connection's
    /// event loop (so a feed's `close()` costs no thread switch), and gives the connection back.
    /// Without a `transaction` (a read of changes alone, `openRuleChanges`), it only gives the connection back.
    func endReadInBackground(_ connection: PostgresConnection, transaction: Bool = true) {
        guard transaction else { return readers.checkin(connection) }
        if #available(macOS 15.0, *) {
            Task(executorPreference: EventLoopExecutor(connection.eventLoop)) { await self.endRead(connection) }
        } else {
            Task { await self.endRead(connection) }
        }
    }

    /// Ends the read transaction on `connection`, if there is one, and gives the connection back.
    func endRead(_ connection: PostgresConnection, transaction: Bool = true) async {
        guard transaction else { return readers.checkin(connection) }
        do {
            try await PostgresReadTransaction.commit(connection, logger: logger)
            readers.checkin(connection)
        } catch {
            readers.discard(connection)
        }
    }
}

/// Rows of one query, read into batches of about `maximumBytes`. The rows arrive with
/// backpressure: postgres-nio reads from the socket only as fast as batches are taken.
struct RowBatcher {
    private var iterator: PostgresRowSequence.AsyncIterator?

    init(_ rows: PostgresRowSequence) { iterator = rows.makeAsyncIterator() }

    /// The next batch (columns: hidden, body), nil at the end.
    mutating func next(maximumBytes: Int) async throws -> RecordBatch? {
        guard var rows = iterator else { return nil }
        var batch = RecordBatch(capacity: maximumBytes + 4096)
        while batch.bytes.count < maximumBytes {
            guard let row = try await rows.next() else {
                iterator = nil
                return batch.isEmpty ? nil : batch
            }
            let (hidden, body) = try row.decode((Bool, ByteBuffer).self)
            body.withUnsafeReadableBytes { batch.append(body: $0, hidden: hidden) }
        }
        iterator = rows
        return batch
    }
}

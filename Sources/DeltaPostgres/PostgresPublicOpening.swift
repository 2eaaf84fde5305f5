import DeltaCore
import DeltaStore
import NIOConcurrencyHelpers
import PostgresNIO

/// A small delta of a whole collection (`PostgresStore.read` from a token), read in one
/// statement without a transaction: the verdict's facts and up to `readAhead` changed records.
///
/// The statement is one snapshot (a STABLE function's statements all see the calling query's),
/// so the token its facts name describes exactly the records it returns. When they are all the
/// changed records, the answer is that statement alone: one round trip where the transaction
/// took four (`BEGIN`, the facts, the records, `COMMIT`), each parsed and planned again. A
/// delta larger than that, a full answer, or a collection without records is read again the
/// way it was, in a transaction: the statement's work is then lost, bounded by `readAhead`.
struct PostgresPublicOpening {
    /// Changed records read ahead; a delta with more is read again in a transaction.
    static let readAhead = 256
    /// The most bytes of bodies read ahead: past them, the delta is read again in a
    /// transaction, and streamed (memory stays bounded whatever size records have).
    static let readAheadBytes = 1 << 20

    /// The opening statement, a function the schema creates (`PostgresStore.schema`), planned
    /// as `PostgresReadOpening.function` is (generic plans made once per connection; no JIT, no
    /// sequential scans). The changed records come in the order every delta sends them:
    /// position, then id; the limit is taken in position order alone, which the index on
    /// `(collection, position)` gives (the generic plan for both orders at once sorted the
    /// whole collection: 9.7 ms a call on 100,000 records, against 0.16 ms), and only a set
    /// under the limit, every changed record, is used.
    static let function = """
        CREATE OR REPLACE FUNCTION deltasnap.open_public_read(text, bigint, text, bigint, bigint)
        RETURNS TABLE(facts bytea, digest bytea, changed bigint, bytes bigint, framed bytea)
        LANGUAGE plpgsql STABLE SET plan_cache_mode = force_generic_plan SET jit = off SET enable_seqscan = off AS $fn$
        #variable_conflict use_column
        BEGIN
        RETURN QUERY
        \(PostgresReadOpening.factsRow(framedRecords));
        END $fn$
        """

    /// The rest of the opening's one row: how many records changed (counted up to $4), their
    /// bodies' bytes, and the records framed one after the other in position, then id, order
    /// (a byte 1 for hidden or 0, the body's length in 4 big-endian bytes, the body), those
    /// within $5 bytes of bodies only. One row instead of one per record: postgres-nio decoded
    /// each row's message and cells, a tenth of the server's time.
    private static let framedRecords = """
        , a.changed, a.bytes, a.framed FROM (
            SELECT count(*) AS changed, max(w.running) AS bytes,
                   string_agg(CASE WHEN w.hidden THEN '\\x01'::bytea ELSE '\\x00'::bytea END || int4send(octet_length(w.body)) || w.body, ''::bytea
                              ORDER BY w.position, w.id) FILTER (WHERE w.running <= $5) AS framed
            FROM (
                SELECT l.position, l.id, l.hidden, l.body, sum(octet_length(l.body)) OVER (ORDER BY l.position ROWS UNBOUNDED PRECEDING) AS running
                FROM (
                    SELECT r.position, r.id, r.hidden, r.body FROM deltasnap.records r
                    WHERE r.collection = $1 AND r.position > $2 ORDER BY r.position LIMIT $4
                ) l
            ) w
        ) a
        """

    /// The call of `function`, prepared once per connection.
    private struct Statement: PostgresPreparedStatement {
        static let name = "deltasnap_open_public_read"
        static let sql = "SELECT * FROM deltasnap.open_public_read($1, $2, $3, $4, $5)"
        typealias Row = PostgresRow
        let collection: String, position: Int64, client: String?, ahead: Int64, bytes: Int64

        func makeBindings() throws -> PostgresBindings {
            var binds = PostgresBindings(capacity: 5)
            binds.append(collection)
            binds.append(position)
            binds.append(client)
            binds.append(ahead)
            binds.append(bytes)
            return binds
        }

        func decodeRow(_ row: PostgresRow) throws -> Row { row }
    }

    /// The whole answer to a read of `collection` from `since` (a token or position after 0)
    /// when one statement holds it: a `304` or a rejection, or a delta of at most `readAhead`
    /// records; nil when it must be read in a transaction. The connection is checked out and
    /// back in here.
    static func read(
        _ store: PostgresStore, _ collection: CollectionName, since: Since, client: String?
    ) async throws -> (result: ReadResult, lastMutation: UInt64?)? {
        let position = ReadVerdict.askedPosition(since)
        guard position > 0 else { return nil }
        let connection = try await store.checkoutReader()
        let statement = Statement(
            collection: collection.rawValue, position: Int64(clamping: position), client: client, ahead: Int64(readAhead + 1), bytes: Int64(readAheadBytes))
        var row: (facts: ByteBuffer?, digest: ByteBuffer?, changed: Int64, bytes: Int64?, framed: ByteBuffer?)?
        do {
            for try await cells in try await connection.execute(statement, logger: store.logger) {
                var cell = cells.makeIterator()
                row = (
                    try cell.next()?.decode(ByteBuffer?.self), try cell.next()?.decode(ByteBuffer?.self), try cell.next()?.decode(Int64.self) ?? 0,
                    try cell.next()?.decode(Int64?.self), try cell.next()?.decode(ByteBuffer?.self)
                )
            }
        } catch {
            await store.release(connection, to: store.readers, failed: true)
            throw store.failure(error)
        }
        store.readers.checkin(connection)
        guard let row else {
            throw StoreError(.corrupt, "read of \(collection)", "the opening statement returned no row", evidence: "store \(store.location)")
        }
        let first = try OpeningFacts(row.facts, digest: row.digest, collection: collection, store: store)
        let last = client.map { _ in first.lastMutation ?? 0 }
        // All the changed records were read when fewer than the limit came, within the bytes:
        // their count decides between a delta and the full dataset as the transaction's would.
        guard row.changed <= readAhead, (row.bytes ?? 0) <= readAheadBytes else { return nil }
        var changed = RecordBatch(capacity: row.framed?.readableBytes ?? 0)
        if var framed = row.framed {
            while let flag = framed.readInteger(as: UInt8.self) {
                guard let length = framed.readInteger(as: UInt32.self), let slice = framed.readSlice(length: Int(length)) else {
                    throw StoreError(
                        .corrupt, "read of \(collection)", "the opening statement's records end inside a record", evidence: "store \(store.location)")
                }
                slice.withUnsafeReadableBytes { changed.append(body: $0, hidden: flag == 1) }
            }
        }
        guard changed.count == row.changed else {
            throw StoreError(
                .corrupt, "read of \(collection)", "the opening statement framed \(changed.count) records of \(row.changed)",
                evidence: "store \(store.location)")
        }
        let verdict = try ReadVerdict.decide(
            collection, since: since, database: store.databaseID,
            facts: try PostgresStore.facts(first.columns, changed: Int64(changed.count), of: collection.rawValue, store: store.location.description),
            store: store.location.description)
        switch verdict {
        case .answer(let result):
            return (result, last)
        case .stream(let token, .delta(let from), let digest) where from == position:
            return (.changes(PostgresReadAheadFeed(changed, token: token, mode: .delta(since: from), digest: digest)), last)
        case .stream:
            return nil
        }
    }
}

/// The changed records of a delta read ahead (`PostgresPublicOpening`), given in one batch;
/// holds no connection.
final class PostgresReadAheadFeed: ChangeFeed, @unchecked Sendable {
    let token: Token
    let digest: StateDigest
    let mode: FeedMode
    /// Used by one task at a time, as `ChangeFeed` requires: the records not yet given.
    private var records: RecordBatch?

    init(_ records: RecordBatch, token: Token, mode: FeedMode, digest: StateDigest) {
        self.records = records.isEmpty ? nil : records
        self.token = token
        self.mode = mode
        self.digest = digest
    }

    /// All the records in one batch (at most `PostgresPublicOpening.readAhead` of them), then nil.
    func next(maximumBytes: Int) async throws -> RecordBatch? {
        defer { records = nil }
        return records
    }

    func close() { records = nil }
}

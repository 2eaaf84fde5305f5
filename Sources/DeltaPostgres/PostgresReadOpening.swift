import DeltaCore
import DeltaStore
import PostgresNIO

/// What a selection's or a user's read learns in its first statement, inside its REPEATABLE
/// READ transaction: the verdict's facts, the history kept, the head's tag, the rules version,
/// the client's last mutation id, and, for a delta, its first changed records.
///
/// One statement instead of four (verdict, facts, last mutation, cursor) and a fetch: on
/// PostgreSQL every statement is a round trip, and a user's small delta was six of them.
struct PostgresReadOpening {
    /// Changed records read ahead in the opening statement; a delta with more reads them all
    /// again through a cursor (`PostgresSelectionSource`), so this bounds the wasted work.
    static let readAhead = 256

    let verdict: ReadVerdict
    /// Deltas from before this position are `expired` (the superseded versions are gone).
    let historySince: UInt64
    /// The database's head: its newest commit.
    let head: Token
    /// The version of the rules the database holds (0: none).
    let rulesVersion: UInt64
    /// The client's last mutation id (0 before its first push); nil without a client.
    let lastMutation: UInt64?
    /// Every record changed after the asked position, with its version then, when there were
    /// at most `readAhead` of them; nil when there were more, or no position was asked.
    let changed: [ChangedRecord]?
    /// The position the read asked from (0 for none).
    let askedPosition: UInt64

    /// The changed records read ahead, for a feed in `mode`: only a delta from the asked position has them.
    func changed(for mode: FeedMode) -> [ChangedRecord]? {
        guard case .delta(let position) = mode, position == askedPosition else { return nil }
        return changed
    }

    /// The opening statement, a function the schema creates (`PostgresStore.schema`): its
    /// plans are made once per connection, generic (`force_generic_plan`), where a statement
    /// sent with its parameters is parsed and planned again each time, which cost a small
    /// delta more than running it. Its one parameter-sensitive part, the changed records, is
    /// written so the generic plan is the index scan: positions in order, at most `$4`. `jit`
    /// is off: the generic plan's estimates would compile it, for 20 ms, to read 100 rows.
    /// Sequential scans are off: every read here is a lookup by key, and on a small
    /// `superseded` table the planner chose to scan it whole once per changed record (2.0 ms
    /// for 100 changes, 0.2 ms by its key).
    ///
    /// Its first row holds the facts, in one `bytea` of ten big-endian 8-byte integers (-1 for
    /// none) beside the digest; each further row is one changed record: id, hidden, body, and
    /// the version before the asked position. One row of fifteen columns per changed record,
    /// the facts repeated in each, cost postgres-nio fifteen cells to decode per record, about
    /// a tenth of a small delta's server time. (Framing the records into one `bytea` as well
    /// was measured: it moved 0.2 ms per delta into PostgreSQL, which every instance shares.)
    /// Its name differs from the function it replaces (`read_opening`, left in place), so an
    /// older instance on the same database keeps working while instances are upgraded.
    static let function = """
        CREATE OR REPLACE FUNCTION deltasnap.open_read(text, bigint, text, bigint)
        RETURNS TABLE(facts bytea, digest bytea, id text, hidden boolean, body bytea, before bytea)
        LANGUAGE plpgsql STABLE SET plan_cache_mode = force_generic_plan SET jit = off SET enable_seqscan = off AS $fn$
        #variable_conflict use_column
        BEGIN
        RETURN QUERY
        \(factsRow(", NULL::text, NULL::boolean, NULL::bytea, NULL::bytea"));
        RETURN QUERY
        SELECT NULL::bytea, NULL::bytea, r.id, r.hidden, r.body, s.body FROM deltasnap.records r
        LEFT JOIN LATERAL (
            SELECT t.hidden, t.body FROM deltasnap.superseded t
            WHERE t.collection = r.collection AND t.id = r.id AND t.position <= $2 ORDER BY t.position DESC LIMIT 1
        ) s ON NOT s.hidden
        WHERE r.collection = $1 AND r.position > $2 AND $4::bigint > 0 ORDER BY r.position
        LIMIT $4;
        END $fn$
        """

    /// The opening's first row: the facts, in one `bytea` of ten big-endian 8-byte integers (-1
    /// for none), and the collection's digest, then `rest` (the row's other columns, as NULLs).
    /// Parameters: $1 the collection, $2 the asked position, $3 the client.
    static func factsRow(_ rest: String) -> String {
        """
        SELECT int8send((SELECT coalesce(max(position), 0) FROM deltasnap.commits))
               || int8send(coalesce((SELECT value::bigint FROM deltasnap.meta WHERE key = 'horizon'), -1))
               || int8send(coalesce((SELECT max(position) FROM deltasnap.records WHERE collection = $1), -1))
               || int8send(coalesce((SELECT tag FROM deltasnap.commits WHERE position = (SELECT max(position) FROM deltasnap.records WHERE collection = $1)), -1))
               || int8send(coalesce((SELECT tag FROM deltasnap.commits WHERE position = $2), -1))
               || int8send(coalesce((SELECT records FROM deltasnap.digests WHERE collection = $1), -1))
               || int8send(coalesce((SELECT value::bigint FROM deltasnap.meta WHERE key = 'history_since'), 0))
               || int8send(coalesce((SELECT tag FROM deltasnap.commits ORDER BY position DESC LIMIT 1), 0))
               || int8send(coalesce((SELECT max(version) FROM deltasnap.rules), 0))
               || int8send(coalesce((SELECT last_mutation FROM deltasnap.push_clients WHERE client = $3::text), -1)),
               (SELECT digest FROM deltasnap.digests WHERE collection = $1)\(rest)
        """
    }

    /// The call of `function`, prepared once per connection.
    private struct Statement: PostgresPreparedStatement {
        /// A short, fixed name (the default names the type with an address, past PostgreSQL's
        /// 63-byte identifiers).
        static let name = "deltasnap_open_read"
        static let sql = "SELECT * FROM deltasnap.open_read($1, $2, $3, $4)"
        /// Decoded by `read`, cell by cell: a tuple decoded through one parameter pack
        /// resolved generic metadata at every column.
        typealias Row = PostgresRow
        let collection: String, position: Int64, client: String?, ahead: Int64

        func makeBindings() throws -> PostgresBindings {
            var binds = PostgresBindings(capacity: 4)
            binds.append(collection)
            binds.append(position)
            binds.append(client)
            binds.append(ahead)
            return binds
        }

        func decodeRow(_ row: PostgresRow) throws -> Row { row }
    }

    /// Reads the opening of a read of `collection` from `since` on `connection`, whose
    /// transaction is open; `client` nil when the read names none. With `absentIsEmpty` (a
    /// user's read), a collection without records is read as empty (`ReadVerdict.decide`).
    static func read(
        _ store: PostgresStore, _ connection: PostgresConnection, _ collection: CollectionName, since: Since, client: String?, absentIsEmpty: Bool = false
    ) async throws -> PostgresReadOpening {
        let position = ReadVerdict.askedPosition(since)
        let statement = Statement(
            collection: collection.rawValue, position: Int64(clamping: position), client: client, ahead: Int64(position > 0 ? readAhead + 1 : 0))
        var facts: ByteBuffer?
        var digest: ByteBuffer?
        var changed: [ChangedRecord] = []
        do {
            for try await row in try await connection.execute(statement, logger: store.logger) {
                var cells = Cells(cells: row.makeIterator())
                if facts == nil {
                    (facts, digest) = (try cells.next(ByteBuffer?.self), try cells.next(ByteBuffer?.self))
                    continue
                }
                cells.skip(2)
                let (id, hidden, body, before) = (
                    try cells.next(String.self), try cells.next(Bool.self), try cells.next(ByteBuffer.self), try cells.next(ByteBuffer?.self)
                )
                changed.append(ChangedRecord(id: id, hidden: hidden, body: Array(buffer: body), before: before.map { Array(buffer: $0) }))
            }
        } catch {
            throw store.failure(error)
        }
        let first = try OpeningFacts(facts, digest: digest, collection: collection, store: store)
        let decided = try ReadVerdict.decide(
            collection, since: since, database: store.databaseID,
            facts: try PostgresStore.facts(first.columns, changed: nil, of: collection.rawValue, store: store.location.description),
            store: store.location.description,
            absentIsEmpty: absentIsEmpty
        )
        return PostgresReadOpening(
            verdict: decided, historySince: first.historySince, head: first.head(store.databaseID), rulesVersion: first.rulesVersion,
            lastMutation: client.map { _ in first.lastMutation ?? 0 },
            changed: position > 0 && changed.count <= readAhead ? changed : nil, askedPosition: position)
    }
}

/// The facts of an opening statement's first row (`PostgresReadOpening.factsRow`), decoded.
struct OpeningFacts {
    /// The verdict's columns, as the verdict statement gives them.
    let columns: PostgresStore.VerdictColumns
    /// Deltas from before this position are `expired` for users (the superseded versions are gone).
    let historySince: UInt64
    /// The tag of the database's newest commit.
    let headTag: Int64
    /// The version of the rules the database holds (0: none).
    let rulesVersion: UInt64
    /// The client's last mutation id; nil when the client never pushed (or none was named).
    let lastMutation: UInt64?

    /// Decodes `facts` (ten big-endian 8-byte integers, -1 for none) beside `digest`.
    init(_ facts: ByteBuffer?, digest: ByteBuffer?, collection: CollectionName, store: PostgresStore) throws {
        guard var facts, facts.readableBytes == 80 else {
            throw StoreError(.corrupt, "read of \(collection)", "the opening statement returned no facts", evidence: "store \(store.location)")
        }
        var numbers: [Int64] = []
        while let number = facts.readInteger(as: Int64.self) { numbers.append(number) }
        let known = { (value: Int64) in value < 0 ? nil : value }
        columns = (numbers[0], known(numbers[1]), known(numbers[2]), known(numbers[3]), known(numbers[4]), digest, known(numbers[5]))
        historySince = UInt64(clamping: numbers[6])
        headTag = numbers[7]
        rulesVersion = UInt64(clamping: numbers[8])
        lastMutation = known(numbers[9]).map { UInt64(clamping: $0) }
    }

    /// The database's head: its newest commit.
    func head(_ database: UInt64) -> Token {
        Token(database: database, position: UInt64(clamping: columns.0), commit: UInt32(truncatingIfNeeded: headTag))
    }
}

/// A row's cells in order, each decoded as its own concrete type.
private struct Cells {
    var cells: PostgresRow.Iterator
    var read = 0

    mutating func next<T: PostgresDecodable>(_ type: T.Type) throws -> T {
        guard let cell = cells.next() else {
            throw StoreError(.corrupt, "the read opening's row", "it ended before its 6 columns", evidence: "\(read) columns")
        }
        read += 1
        return try cell.decode(T.self)
    }

    mutating func skip(_ count: Int) {
        for _ in 0..<count where cells.next() != nil { read += 1 }
    }
}

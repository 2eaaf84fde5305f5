import PostgresNIO

/// The statements of `PostgresWriteTransaction`, each one round trip. Every write runs them, so
/// they are prepared: parsed and planned once per connection rather than once per write (the
/// upsert's parse and plan took 0.6 ms of the write lock's time per write, unnamed).
extension PostgresWriteTransaction {
    /// One statement per batch: claim the ids for this commit, then insert, or update only when
    /// the content or the hidden state differs. Only changed rows come back, with their place in
    /// the batch, so the commit's chain hashes them in the order they were written, and with the
    /// SHA-256 of the version they replace when it was visible (for the state digest; every part
    /// of one statement sees the table as it was before it). The version replaced is found by
    /// one primary-key lookup per record, in a plan made once for any parameters (the writer
    /// connection's `plan_cache_mode`, `PostgresStore.prepareWriter`): planned for the collection at hand, with
    /// statistics from when it was small, it walked the whole collection by `records_by_position`
    /// for each write (8,172 rows, 7 ms a write, slower as the collection grew).
    struct Upsert: PostgresPreparedStatement {
        static let name = "deltasnap_upsert"
        static let sql = """
            WITH input AS (
                SELECT * FROM unnest($2::text[], $3::boolean[], $4::bytea[]) WITH ORDINALITY AS t(id, hidden, body, n)),
            old AS (
                SELECT input.id, (SELECT sha256(r.body) FROM deltasnap.records r WHERE r.collection = $1 AND r.id = input.id AND NOT r.hidden) AS h
                FROM input),
            claim AS (INSERT INTO pg_temp.written(claim, id) SELECT $6, id FROM input),
            changed AS (
                INSERT INTO deltasnap.records AS r (collection, id, position, hidden, body)
                SELECT $1, id, $5, hidden, body FROM input ORDER BY n
                ON CONFLICT (collection, id) DO UPDATE SET position = excluded.position, hidden = excluded.hidden, body = excluded.body
                WHERE r.hidden <> excluded.hidden OR r.body <> excluded.body
                RETURNING id)
            SELECT input.n, old.h FROM changed JOIN input ON input.id = changed.id LEFT JOIN old ON old.id = changed.id ORDER BY input.n
            """
        /// The changed record's place in the batch (from 1), and the hash of the visible version it replaced.
        typealias Row = (Int64, ByteBuffer?)

        let collection: String
        let ids: [String]
        let hidden: [Bool]
        let bodies: [ByteBuffer]
        let position: Int64
        /// The write's key in the table of claimed ids (`PostgresWriteTransaction.claim`).
        let claim: Int64

        func makeBindings() throws -> PostgresBindings {
            var binds = PostgresBindings(capacity: 6)
            binds.append(collection)
            binds.append(ids)
            binds.append(hidden)
            binds.append(bodies)
            binds.append(position)
            binds.append(claim)
            return binds
        }

        func decodeRow(_ row: PostgresRow) throws -> Row { try row.decode(Row.self) }
    }

    /// Claims the id, hides the record if it is visible, and says whether it exists at all
    /// (the outer query sees the table as it was before the statement) and, when it hid it, the
    /// SHA-256 of its body (for the state digest).
    struct Hide: PostgresPreparedStatement {
        static let name = "deltasnap_hide"
        static let sql = """
            WITH claim AS (INSERT INTO pg_temp.written(claim, id) VALUES ($4, $2)),
            changed AS (
                UPDATE deltasnap.records SET hidden = true, position = $3
                WHERE collection = $1 AND id = $2 AND NOT hidden RETURNING sha256(body) AS h)
            SELECT EXISTS (SELECT 1 FROM deltasnap.records WHERE collection = $1 AND id = $2), (SELECT h FROM changed)
            """
        /// Whether the record exists, and the hash of the body it hid (nil: it was hidden already).
        typealias Row = (Bool, ByteBuffer?)

        let collection: String
        let id: String
        let position: Int64
        /// The write's key in the table of claimed ids (`PostgresWriteTransaction.claim`).
        let claim: Int64

        func makeBindings() throws -> PostgresBindings {
            var binds = PostgresBindings(capacity: 4)
            binds.append(collection)
            binds.append(id)
            binds.append(position)
            binds.append(claim)
            return binds
        }

        func decodeRow(_ row: PostgresRow) throws -> Row { try row.decode(Row.self) }
    }
}

/// The statements of `PostgresWriteTransaction`, each one round trip.
extension PostgresWriteTransaction {
    /// One statement per batch: claim the ids for this commit, then insert, or update only when
    /// the content or the hidden state differs. Only changed rows come back, with their place in
    /// the batch, so the commit's chain hashes them in the order they were written, and with the
    /// SHA-256 of the version they replace when it was visible (for the state digest; every part
    /// of one statement sees the table as it was before it).
    static let upsertSQL = """
        WITH input AS (
            SELECT * FROM unnest($2::text[], $3::boolean[], $4::bytea[]) WITH ORDINALITY AS t(id, hidden, body, n)),
        old AS (
            SELECT r.id, sha256(r.body) AS h FROM deltasnap.records r JOIN input ON r.id = input.id
            WHERE r.collection = $1 AND NOT r.hidden),
        claim AS (INSERT INTO pg_temp.written(id) SELECT id FROM input),
        changed AS (
            INSERT INTO deltasnap.records AS r (collection, id, position, hidden, body)
            SELECT $1, id, $5, hidden, body FROM input ORDER BY n
            ON CONFLICT (collection, id) DO UPDATE SET position = excluded.position, hidden = excluded.hidden, body = excluded.body
            WHERE r.hidden <> excluded.hidden OR r.body <> excluded.body
            RETURNING id)
        SELECT input.n, old.h FROM changed JOIN input ON input.id = changed.id LEFT JOIN old ON old.id = changed.id ORDER BY input.n
        """

    /// Claims the id, hides the record if it is visible, and says whether it exists at all
    /// (the outer query sees the table as it was before the statement) and, when it hid it, the
    /// SHA-256 of its body (for the state digest).
    static let hideSQL = """
        WITH claim AS (INSERT INTO pg_temp.written(id) VALUES ($2)),
        changed AS (
            UPDATE deltasnap.records SET hidden = true, position = $3
            WHERE collection = $1 AND id = $2 AND NOT hidden RETURNING sha256(body) AS h)
        SELECT EXISTS (SELECT 1 FROM deltasnap.records WHERE collection = $1 AND id = $2), (SELECT h FROM changed)
        """
}

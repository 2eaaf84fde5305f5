import DeltaCore
import DeltaRules
import DeltaStore
import NIOConcurrencyHelpers
import PostgresNIO

/// Indexes for the collections that `$rows` rules read, on PostgreSQL (docs/OPERATIONS.md,
/// "Users"), as on SQLite (`SQLiteStore+RowsKeys`): a source whose filter requires one member
/// to equal a claim or a string is read through a partial expression index on that member, so a
/// user's read visits their own membership rows, not the whole collection. The index only
/// narrows what is read; the source's filter still decides.
extension PostgresStore {
    /// The indexed expression's function: member `$2` of a body as text (`->>`, so a string
    /// unescaped, any other value as its JSON text), NULL when the body has no such member.
    /// PostgreSQL indexes only IMMUTABLE expressions, and the cast from `bytea` is not
    /// (`convert_from` depends on the database's encoding, which never changes under it; the
    /// indexes are made only in UTF-8 databases). It must never fail, or so would the write that
    /// stores the body: a stored body is canonical JSON in UTF-8 (docs/PROTOCOL.md), which
    /// PostgreSQL reads, except that it refuses to unescape `\u0000`; a body holding that escape
    /// gives U+0001 instead, which reads by any key include. (Catching the error instead costs a
    /// subtransaction per row, and PostgreSQL builds indexes in parallel workers, which cannot
    /// start one.)
    static let keyFunction = """
        CREATE OR REPLACE FUNCTION deltasnap.body_key(bytea, text) RETURNS text
        LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $fn$
        BEGIN
            IF position('\\x5c7530303030'::bytea IN $1) > 0 THEN
                RETURN E'\\x01';
            END IF;
            RETURN convert_from($1, 'UTF8')::json ->> $2;
        END $fn$
        """

    /// Makes the key indexes exactly those `rules` need (an index no source needs any more is
    /// dropped; none in a database whose encoding is not UTF-8), in `connection`'s transaction,
    /// which holds the write lock; notes them for reads. Building one reads the whole collection
    /// once, and then the table is analyzed; writes wait.
    func syncKeyIndexes(_ connection: PostgresConnection, for rules: Rules) async throws {
        var utf8 = false
        for try await row in try await query(connection, "SELECT current_setting('server_encoding') = 'UTF8'") { utf8 = try row.decode(Bool.self) }
        let wanted = Dictionary(uniqueKeysWithValues: (utf8 ? rules.keyIndexes : [:]).map { (Self.keyIndexName($0.key), $0.value) })
        var present: [String] = []
        let existing = "SELECT indexname FROM pg_indexes WHERE schemaname = 'deltasnap' AND indexname LIKE 'rules\\_key\\_%'"
        for try await row in try await query(connection, existing) { present.append(try row.decode(String.self)) }
        for name in present where wanted[name] == nil { try await execute(connection, "DROP INDEX deltasnap.\"\(name)\"") }
        let missing = wanted.filter { !present.contains($0.key) }
        for (name, source) in missing {
            let on = "deltasnap.records (\(Self.keyExpression(source.member))) WHERE collection = '\(source.collection.rawValue)'"
            try await execute(connection, "CREATE INDEX IF NOT EXISTS \"\(name)\" ON \(on)")
        }
        // The planner knows an indexed expression's values only once the table is analyzed: before,
        // it guesses, and may read the whole collection by position instead.
        if !missing.isEmpty { try await execute(connection, "ANALYZE deltasnap.records") }
        keyIndexes.withLockedValue { $0 = Set(wanted.values.map { RowsKey.indexKey($0.collection, $0.member) }) }
    }

    /// The indexed expression (a query must name it the same way to use the index): the member's
    /// text cut to its first `keyCharacters` characters. PostgreSQL's B-tree refuses an entry
    /// over 2,704 bytes, and with it the write that stores the body (a `$rows` key of a few
    /// kilobytes failed its write with `503`); 600 characters are at most 2,400 bytes of UTF-8.
    /// Values longer than that share entries with those of the same start, and the source's
    /// filter decides, as it always does. `member` is plain (`RowsSource.keyMember`), so it needs
    /// no quoting.
    static func keyExpression(_ member: String) -> String { "left(deltasnap.body_key(body, '\(member)'), \(keyCharacters))" }

    /// How many characters of a key the index holds.
    static let keyCharacters = 600

    /// An index's name on PostgreSQL: the backends' shared name (`RowsKey.indexName`) and the
    /// expression's version, so that an index made on the whole value by an earlier release is
    /// dropped and made again on its start at the next `installRules`.
    static func keyIndexName(_ name: String) -> String { name + "_start" }

    /// The statement reading `collection`'s visible bodies whose `key` member may equal $1 (and
    /// those `body_key` gives U+0001), now (nil) or at $2, through the key index; nil when there
    /// is none. The index holds current versions; at a position, the versions of the records
    /// changed since are all read (few, and the source's filter decides them).
    func keyedBodiesSQL(_ collection: CollectionName, _ key: RowsKey, at position: UInt64?) -> String? {
        guard keyIndexes.withLockedValue({ $0.contains(RowsKey.indexKey(collection, key.member)) }) else { return nil }
        let literal = "'\(collection.rawValue)'"
        let indexed = """
            SELECT body FROM deltasnap.records WHERE collection = \(literal) AND NOT hidden
            AND \(Self.keyExpression(key.member)) IN (left($1, \(Self.keyCharacters)), E'\\x01')
            """
        guard position != nil else { return indexed }
        return indexed + Self.versionsAtPosition(of: literal)
    }

    /// What a read of visible bodies adds to be one at position $2: its own rows are limited to
    /// those unchanged since, and the versions $2 saw of the records changed after it are added.
    /// `collection` is the SQL naming the collection (a parameter or a literal).
    static func versionsAtPosition(of collection: String) -> String {
        """
         AND position <= $2
        UNION ALL
        SELECT s.body FROM deltasnap.records r JOIN LATERAL (
            SELECT t.hidden, t.body FROM deltasnap.superseded t
            WHERE t.collection = r.collection AND t.id = r.id AND t.position <= $2 ORDER BY t.position DESC LIMIT 1
        ) s ON NOT s.hidden
        WHERE r.collection = \(collection) AND r.position > $2
        """
    }

    /// Offers `visit` each visible body of `collection` now (nil) or at `position`, in the open
    /// transaction on `connection`, one at a time (the bytes valid only during the call); with a
    /// `key` that has an index, only the bodies it may match.
    func forEachBody(
        _ connection: PostgresConnection, of collection: CollectionName, at position: UInt64?, key: RowsKey?,
        _ visit: (UnsafeRawBufferPointer) throws -> Void
    ) async throws {
        var binds = PostgresBindings(capacity: 2)
        let sql: String
        if let key, let keyed = keyedBodiesSQL(collection, key, at: position) {
            binds.append(key.value)
            sql = keyed
        } else {
            binds.append(collection.rawValue)
            sql = "SELECT body FROM deltasnap.records WHERE collection = $1 AND NOT hidden" + (position == nil ? "" : Self.versionsAtPosition(of: "$1"))
        }
        if let position { binds.append(Int64(clamping: position)) }
        do {
            for try await row in try await query(connection, sql, binds) { try row.decode(ByteBuffer.self).withUnsafeReadableBytes(visit) }
        } catch {
            throw failure(error)
        }
    }
}

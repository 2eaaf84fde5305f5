import DeltaCore
import DeltaRules
import DeltaSQLite
import DeltaStore

/// Indexes for the collections that `$rows` rules read (docs/OPERATIONS.md, "Users"): a source
/// whose filter requires one member to equal a claim (`{"user": {"eq": {"$claim": "sub"}}}`) is
/// read through a partial index on that member, so a user's read visits their own membership
/// rows, not the whole collection. The index only narrows; the source's filter still decides.
extension SQLiteStore {
    /// Makes the key indexes exactly those `rules` need, in one write transaction on the writer
    /// `connection` (an index no source needs any more is dropped), and notes them for reads.
    /// Building one sorts the collection's keys in temporary files, not in memory as the writer's
    /// other temporary data is, so a large collection costs disk, not memory, once.
    func syncKeyIndexes(_ connection: Connection, for rules: Rules) throws {
        let wanted = rules.keyIndexes
        try connection.execute("PRAGMA temp_store = FILE")
        defer { try? connection.execute("PRAGMA temp_store = MEMORY") }
        try connection.transaction(.immediate) {
            let existing = try connection.statement("SELECT name FROM sqlite_master WHERE type = 'index' AND name LIKE 'rules_key_%'")
            var present: [String] = []
            while try existing.step() { present.append(existing.string(0)) }
            existing.reset()
            for name in present where wanted[name] == nil { try connection.execute("DROP INDEX \"\(name)\"") }
            for (name, source) in wanted {
                let on = "records(\(Self.keyExpression(source.member))) WHERE collection = '\(source.collection.rawValue)'"
                try connection.execute("CREATE INDEX IF NOT EXISTS \"\(name)\" ON \(on)")
            }
        }
        keyIndexes.withLock { $0 = Set(wanted.values.map { RowsKey.indexKey($0.collection, $0.member) }) }
    }

    /// The indexed expression (the SQL text of a query must be the same to use the index).
    /// `member` is plain (`RowsSource.keyMember`), so it needs no quoting in the path.
    static func keyExpression(_ member: String) -> String { "json_extract(body, '$.\(member)')" }

    /// The statement reading `collection`'s visible bodies whose `key` member may equal ?1, now
    /// (nil) or at ?2, through the key index; nil when there is none for it. The index holds
    /// current versions; at a position, the versions of the records changed since are all read
    /// (few, and the source's filter decides them).
    func keyedBodiesSQL(_ collection: CollectionName, _ key: RowsKey, at position: UInt64?) -> String? {
        guard keyIndexes.withLock({ $0.contains(RowsKey.indexKey(collection, key.member)) }) else { return nil }
        let indexed = "SELECT body FROM records WHERE collection = '\(collection.rawValue)' AND \(Self.keyExpression(key.member)) = ?1 AND hidden = 0"
        guard position != nil else { return indexed }
        return indexed + Self.versionsAtPosition(of: "'\(collection.rawValue)'")
    }

    /// What a read of visible bodies adds to be one at position ?2: its own rows are limited to
    /// those unchanged since, and the versions ?2 saw of the records changed after it are added.
    /// `collection` is the SQL naming the collection (a parameter or a literal).
    static func versionsAtPosition(of collection: String) -> String {
        """
         AND position <= ?2
        UNION ALL
        SELECT s.body FROM records r JOIN superseded s ON s.collection = r.collection AND s.id = r.id AND s.hidden = 0 AND s.position = (
            SELECT max(t.position) FROM superseded t WHERE t.collection = r.collection AND t.id = r.id AND t.position <= ?2)
        WHERE r.collection = \(collection) AND r.position > ?2
        """
    }
}

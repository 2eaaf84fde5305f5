import DeltaCore
import DeltaSQLite
import Foundation

/// Full-text search over a replica's collections (SQLite FTS5), for the collections named in
/// `ReplicaConfiguration.searchable`.
///
/// The table `search(collection, id, text)` holds, per record, its chosen string members (all
/// top-level string members when the app chooses none), joined by spaces. Triggers on `records`
/// keep it in step inside the very transaction that changes a record, so deltas, resets and
/// snapshot installs never leave it behind. The app's pending writes are searched at query time
/// (`ReplicaReader.search`), from the same committed state.
enum SearchIndex {
    static let table =
        "CREATE VIRTUAL TABLE IF NOT EXISTS search USING fts5(collection UNINDEXED, id UNINDEXED, text, tokenize = 'unicode61 remove_diacritics 2')"

    /// The SQL that gives the searchable text of a record body `body` (a column or `new.body`).
    ///
    /// A NUL character is searched as a space: SQLite before 3.45 (Debian 12 has 3.40; older Apple
    /// systems ship such versions too) ends a `json_each` value at its first NUL, so the words
    /// after it were never indexed. The body is canonical JSON, where NUL is always the escape `\u0000`; it is
    /// replaced by `\u0020` in the JSON text itself. Where those six characters follow an escaped
    /// backslash instead (the text `\\u0000`), the replacement stays valid JSON and changes only
    /// that literal text's digits.
    static func text(of body: String, members: [String]) -> String {
        let chosen = members.isEmpty ? "" : " AND key IN (\(members.map { "'" + $0.replacingOccurrences(of: "'", with: "''") + "'" }.joined(separator: ", ")))"
        return "(SELECT group_concat(value, ' ') FROM json_each(replace(\(body), '\\u0000', '\\u0020')) WHERE type = 'text'\(chosen))"
    }

    /// Creates or updates the search index of every collection: triggers, and a rebuild of a
    /// collection's rows when it was not searchable before or its members changed; drops those
    /// no longer configured. One transaction, on the writer connection.
    static func apply(_ searchable: [String: [String]], on connection: Connection) throws {
        try connection.transaction(.immediate) {
            try connection.execute(table)
            let before = try configured(connection)
            for (collection, members) in searchable {
                _ = try CollectionName(collection)
                let form = members.isEmpty ? "*" : members.joined(separator: "\u{0}")
                let text = Self.text(of: "new.body", members: members)
                let prefix = "search_\(collection.replacingOccurrences(of: "-", with: "_dash_"))"
                // Kept when its members are the same and its triggers compute the text as this
                // version does; rebuilt otherwise (a store indexed before NULs were searched).
                let trigger = try connection.text("SELECT sql FROM sqlite_master WHERE type = 'trigger' AND name = ?", .text("\(prefix)_insert"))
                guard before[collection] != form || trigger?.contains(text) != true else { continue }
                try drop(collection, connection)
                try connection.execute(
                    """
                    CREATE TRIGGER \(prefix)_insert AFTER INSERT ON records WHEN new.collection = '\(collection)' BEGIN
                        INSERT INTO search(collection, id, text) VALUES (new.collection, new.id, \(text));
                    END;
                    CREATE TRIGGER \(prefix)_delete AFTER DELETE ON records WHEN old.collection = '\(collection)' BEGIN
                        DELETE FROM search WHERE collection = old.collection AND id = old.id;
                    END;
                    CREATE TRIGGER \(prefix)_update AFTER UPDATE ON records WHEN new.collection = '\(collection)' BEGIN
                        DELETE FROM search WHERE collection = old.collection AND id = old.id;
                        INSERT INTO search(collection, id, text) VALUES (new.collection, new.id, \(text));
                    END;
                    """)
                try connection.statement(
                    "INSERT INTO search(collection, id, text) SELECT collection, id, \(Self.text(of: "body", members: members)) FROM records WHERE collection = ?"
                )
                .run(.text(collection))
                try connection.statement("INSERT OR REPLACE INTO sync_state(key, value) VALUES (?, ?)").run(.text("search:" + collection), .text(form))
            }
            for collection in before.keys where searchable[collection] == nil { try drop(collection, connection) }
        }
    }

    /// Removes a collection's triggers, rows and setting.
    private static func drop(_ collection: String, _ connection: Connection) throws {
        let prefix = "search_\(collection.replacingOccurrences(of: "-", with: "_dash_"))"
        for suffix in ["insert", "delete", "update"] { try connection.execute("DROP TRIGGER IF EXISTS \(prefix)_\(suffix)") }
        try connection.statement("DELETE FROM search WHERE collection = ?").run(.text(collection))
        try connection.statement("DELETE FROM sync_state WHERE key = ?").run(.text("search:" + collection))
    }

    /// The searchable collections and their member lists, as stored.
    static func configured(_ connection: Connection) throws -> [String: String] {
        let statement = try connection.statement("SELECT substr(key, 8), value FROM sync_state WHERE key LIKE 'search:%'")
        defer { statement.reset() }
        var found: [String: String] = [:]
        while try statement.step() { found[statement.string(0)] = statement.string(1) }
        return found
    }

    /// An FTS5 query that finds records holding every word of `text` (each word quoted, so
    /// punctuation in what a user typed is never FTS5 syntax); the last word also as a prefix.
    static func match(_ text: String) -> String? {
        let words = text.split(whereSeparator: { $0.isWhitespace }).map { "\"" + $0.replacingOccurrences(of: "\"", with: "\"\"") + "\"" }
        guard let last = words.last else { return nil }
        return (words.dropLast() + [last + " *"]).joined(separator: " ")
    }
}

import DeltaCore
import DeltaSQLite
import Foundation

/// Ranked full-text search over a replica (see `SearchIndex`).
extension ReplicaReader {
    /// The visible records of `collection` that hold every word of `text` in their searchable
    /// members (the last word may be the start of one), best match first (FTS5's bm25), at most
    /// `limit`. Case and diacritics are ignored. The app's pending writes are searched too and
    /// replace the server's versions. Throws when the collection is not searchable
    /// (`ReplicaConfiguration.searchable`).
    public func search(_ text: String, in collection: String, limit: Int = 50) throws -> [Record] {
        try check(collection)
        guard let match = SearchIndex.match(text) else { return [] }
        return try read { connection in
            try connection.transaction {
                guard let form = try connection.text("SELECT value FROM sync_state WHERE key = ?", .text("search:" + collection)) else {
                    throw ReplicaError(
                        .configuration, "the collection is not searchable: name it in ReplicaConfiguration.searchable (deltasnap sync --search)",
                        evidence: collection)
                }
                let members = form == "*" ? [] : form.components(separatedBy: "\u{0}")
                // The app's pending versions, indexed the same way in a temporary table.
                try connection.execute(
                    "CREATE VIRTUAL TABLE IF NOT EXISTS temp.local_search USING fts5(id UNINDEXED, hidden UNINDEXED, body UNINDEXED, text, tokenize = 'unicode61 remove_diacritics 2'); DELETE FROM temp.local_search"
                )
                try connection.statement(
                    "INSERT INTO temp.local_search(id, hidden, body, text) SELECT id, hidden, body, \(SearchIndex.text(of: "body", members: members)) FROM outbox.overlay WHERE collection = ?"
                )
                .run(.text(collection))
                var hits: [(rank: Double, record: Record)] = []
                let local = try connection.statement(
                    "SELECT id, body, rank FROM temp.local_search WHERE local_search MATCH ? AND hidden = 0 ORDER BY rank LIMIT ?")
                defer { local.reset() }
                try local.bind([.text(match), .integer(Int64(limit))])
                while try local.step() { hits.append((local.double(2), Record(id: local.string(0), hidden: false, canonicalBody: local.bytes(1)))) }
                let server = try connection.statement(
                    """
                    SELECT r.id, r.body, s.rank FROM search s JOIN records r ON r.collection = s.collection AND r.id = s.id
                    WHERE s.search MATCH ? AND s.collection = ? AND NOT EXISTS (SELECT 1 FROM outbox.overlay o WHERE o.collection = r.collection AND o.id = r.id)
                    ORDER BY s.rank LIMIT ?
                    """)
                defer { server.reset() }
                try server.bind([.text(match), .text(collection), .integer(Int64(limit))])
                while try server.step() { hits.append((server.double(2), Record(id: server.string(0), hidden: false, canonicalBody: server.bytes(1)))) }
                return hits.sorted { $0.rank < $1.rank }.prefix(limit).map(\.record)
            }
        }
    }
}

extension Replica {
    /// Ranked full-text search; see `ReplicaReader.search`.
    public func search(_ text: String, in collection: String, limit: Int = 50) async throws -> [Record] {
        try await background { [reader] in try reader.search(text, in: collection, limit: limit) }
    }
}

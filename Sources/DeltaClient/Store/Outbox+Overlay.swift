import DeltaCore
import DeltaSQLite

/// The overlay: the version of each record the app sees instead of the store's, from its first
/// local edit until a pull confirms the server has it, with the base of that edit.
extension Outbox {
    /// Shows `record` (hidden: deleted) as the app's version of it. A record without a local version
    /// yet takes the collection's base (`collectionETag`): the server copy the app saw when it began
    /// editing. One that has a local version keeps its base, however often it is edited again, so
    /// that an edit on top of an unconfirmed one is checked against the server copy the app saw,
    /// not against one a pull brought in meanwhile that the app never showed.
    func show(_ record: Record, in collection: String, _ connection: Connection, base: String? = nil) throws {
        try connection.statement(
            """
            INSERT INTO overlay(collection, id, hidden, body, base)
            VALUES (?1, ?2, ?3, ?4, coalesce(?5, (SELECT \(Self.baseColumn) FROM store.collections WHERE name = ?1)))
            ON CONFLICT(collection, id) DO UPDATE SET hidden = excluded.hidden, body = excluded.body, base = coalesce(?5, base)
            """
        ).run(
            .text(collection), .text(record.id), .integer(record.hidden ? 1 : 0), .text(String(decoding: record.body, as: UTF8.self)),
            base.map { .text($0) } ?? .null)
    }

    /// The base of an edit of `collection`: its `ETag` as the replica holds it now; before its first
    /// sync of a selection installed from a snapshot baked for another (no token yet), the token of
    /// that snapshot, whose records the replica's were cut from, so they are the server's copies at
    /// it; nil for a collection it does not hold.
    func collectionETag(_ collection: String, _ connection: Connection) throws -> String? {
        try connection.text("SELECT \(Self.baseColumn) FROM store.collections WHERE name = ?", .text(collection)).flatMap(Self.sentBase)
    }

    /// The SQL for a collection's base: `collectionETag`.
    static let baseColumn = "CASE WHEN etag = '' THEN snapshot_etag ELSE etag END"

    /// The `base` a mutation carries for a stored one: nil for none and for an empty one (an earlier
    /// version queued the empty ETag of a collection that held no token yet; the server refuses an
    /// empty `base`, so such a mutation would otherwise be refused on every push).
    static func sentBase(_ stored: String?) -> String? {
        guard let stored, !stored.isEmpty else { return nil }
        return stored
    }
}

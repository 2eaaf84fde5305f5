public import DeltaCore
public import DeltaStore
import PostgresNIO

/// A download's access check and the blob's row, in one prepared statement: every `GET` of a
/// public blob asks it, so it is parsed and planned once per connection rather than per request.
///
/// The check stays in the database on every request, so that hiding the last public row that
/// references a blob makes it `404` at once, on every instance.
struct PostgresBlobLookup: PostgresPreparedStatement {
    /// A short, fixed name (the default names the type with an address, past PostgreSQL's
    /// 63-byte identifiers).
    static let name = "deltasnap_referenced_blob"
    static let sql = """
        SELECT size, type FROM deltasnap.blobs WHERE hash = $1 AND EXISTS (
            SELECT 1 FROM deltasnap.blob_refs b JOIN deltasnap.records r ON r.collection = b.collection AND r.id = b.id
            WHERE b.hash = $1 AND NOT r.hidden AND ($2::text[] IS NULL OR b.collection = ANY($2)))
        """
    typealias Row = (Int64, String)

    /// The blob's hash, in hex.
    let hash: String
    /// The collections whose rows count; nil: every collection.
    let collections: [String]?

    func makeBindings() throws -> PostgresBindings {
        var binds = PostgresBindings(capacity: 2)
        binds.append(hash)
        binds.append(collections)
        return binds
    }

    func decodeRow(_ row: PostgresRow) throws -> Row { try row.decode(Row.self) }
}

extension PostgresStore {
    /// The blob, when a visible row of `collections` references it: one prepared statement.
    public func referencedBlob(_ hash: BlobHash, in collections: [CollectionName]?) async throws -> StoredBlob? {
        let statement = PostgresBlobLookup(hash: hash.hex, collections: collections?.map(\.rawValue))
        return try await withReader { connection in
            for try await (size, type) in try await connection.execute(statement, logger: logger) {
                return StoredBlob(hash: hash, size: size, type: type)
            }
            return nil
        }
    }
}

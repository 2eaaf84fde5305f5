import PostgresNIO

/// An upload's part, written by a prepared statement. Sent unnamed, PostgreSQL would plan the
/// `INSERT` again for every part with the part's megabyte as a constant, copying it as it
/// plans; prepared, it plans it with a parameter after the first few parts of a connection.
///
/// The statement's own transaction commits without waiting for its WAL to reach the disk
/// (`synchronous_commit` off, set for that transaction alone). Nothing is lost by it: a staged
/// part is read by nobody until the transaction that publishes the blob (`publishBlob`) or keeps
/// the cut upload (`suspend`) commits, and that commit waits for the WAL up to its own record,
/// which follows every part's. A crash before then loses only the latest parts of an upload
/// that had not ended; a kept upload is always whole parts from the first.
struct PostgresBlobPartInsert: PostgresPreparedStatement {
    /// A short, fixed name, as `PostgresBlobLookup`'s.
    static let name = "deltasnap_blob_part"
    static let sql = """
        WITH quick AS (SELECT set_config('synchronous_commit', 'off', true))
        INSERT INTO deltasnap.blob_parts(hash, part, bytes) SELECT $1, $2, $3 FROM quick
        """
    typealias Row = Void

    /// The upload's staging key.
    let key: String
    /// The part's number, from 0.
    let part: Int32
    /// The part's bytes.
    let bytes: ByteBuffer

    func makeBindings() throws -> PostgresBindings {
        var binds = PostgresBindings(capacity: 3)
        binds.append(key)
        binds.append(part)
        binds.append(bytes)
        return binds
    }

    func decodeRow(_ row: PostgresRow) throws -> Row {}
}

extension PostgresStore {
    /// Writes `statement`'s part on a pooled connection.
    func insertBlobPart(_ statement: PostgresBlobPartInsert) async throws {
        try await withReader { connection in
            for try await _ in try await connection.execute(statement, logger: logger) {}
        }
    }
}

import DeltaCore
import DeltaStore
import Logging
import PostgresNIO

/// Each collection's state digest (`StateDigest`), one row in `deltasnap.digests`, changed by
/// every commit under the write lock in the same transaction as its records, and read by every
/// read in the same statement as its token. PostgreSQL hashes the bodies (`sha256`), so only
/// 32 bytes per record travel; the sum modulo 2^256 is done here.
extension PostgresStore {
    /// One record's contribution, from the 32 bytes `sha256(body)` returned.
    static func element(_ hash: ByteBuffer) throws -> StateDigest {
        guard let element = StateDigest(bytes: Array(hash.readableBytesView)) else {
            throw StoreError(.corrupt, "sha256", "did not return 32 bytes", evidence: "\(hash.readableBytes) bytes")
        }
        return element
    }

    /// Writes a write group's commit rows and adds its changes to the stored digests and visible
    /// counts (`deltasnap.digest_add`), inside its transaction: one statement for any number of
    /// commits and collections.
    func addCommits(_ connection: PostgresConnection, _ group: PostgresWriteGroup) async throws {
        let changes = group.changes.sorted { $0.key.rawValue < $1.key.rawValue }
        var binds = PostgresBindings(capacity: 6)
        binds.append(group.commits.map { Int64($0.token.position) })
        binds.append(group.commits.map { Int64($0.token.commit) })
        binds.append(group.commits.map(\.at))
        binds.append(changes.map(\.key.rawValue))
        binds.append(changes.map { ByteBuffer(bytes: $0.value.digest.bytes) })
        binds.append(changes.map { Int64($0.value.records) })
        let sql = """
            WITH written AS (
                INSERT INTO deltasnap.commits(position, tag, committed_at) SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::bigint[]))
            INSERT INTO deltasnap.digests AS d(collection, digest, records) SELECT * FROM unnest($4::text[], $5::bytea[], $6::bigint[])
            ON CONFLICT (collection) DO UPDATE SET digest = deltasnap.digest_add(d.digest, EXCLUDED.digest), records = d.records + EXCLUDED.records
            """
        for try await _ in try await query(connection, sql, binds) {}
    }

    /// Computes every collection's digest from its records once, for a database from before
    /// digests were kept (`meta` key `digests_since` then records the position it was done at).
    /// Runs in the schema transaction, under the write lock.
    static func computeDigests(_ connection: PostgresConnection, logger: Logger) async throws {
        for try await _ in try await connection.query("SELECT 1 FROM deltasnap.meta WHERE key = 'digests_since'", logger: logger) { return }
        try await run(connection, "DELETE FROM deltasnap.digests", logger: logger)
        var digests: [String: StateDigest] = [:]
        var counts: [String: Int64] = [:]
        let rows = try await connection.query("SELECT collection, sha256(body) FROM deltasnap.records WHERE NOT hidden", logger: logger)
        for try await row in rows {
            let (collection, hash) = try row.decode((String, ByteBuffer).self)
            digests[collection, default: .empty].add(try element(hash))
            counts[collection, default: 0] += 1
        }
        for (collection, digest) in digests {
            let bytes = ByteBuffer(bytes: digest.bytes)
            let count = counts[collection, default: 0]
            try await connection.query("INSERT INTO deltasnap.digests(collection, digest, records) VALUES (\(collection), \(bytes), \(count))", logger: logger)
        }
        try await run(
            connection, "INSERT INTO deltasnap.meta(key, value) SELECT 'digests_since', coalesce(max(position), 0)::text FROM deltasnap.commits",
            logger: logger)
    }
}

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

    /// Adds a commit's `change` to the stored digest and visible count of `collection`, inside the write transaction.
    func addDigest(_ connection: PostgresConnection, _ collection: CollectionName, _ change: StateChange) async throws {
        var binds = PostgresBindings(capacity: 3)
        binds.append(collection.rawValue)
        var digest = StateDigest.empty
        var records: Int64 = 0
        for try await row in try await query(connection, "SELECT digest, records FROM deltasnap.digests WHERE collection = $1", binds) {
            let (stored, count) = try row.decode((ByteBuffer, Int64).self)
            (digest, records) = (try Self.element(stored), count)
        }
        digest.add(change.digest)
        binds.append(ByteBuffer(bytes: digest.bytes))
        binds.append(records + Int64(change.records))
        let sql = """
            INSERT INTO deltasnap.digests(collection, digest, records) VALUES ($1, $2, $3)
            ON CONFLICT (collection) DO UPDATE SET digest = EXCLUDED.digest, records = EXCLUDED.records
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

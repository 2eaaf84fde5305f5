public import DeltaCore
public import DeltaStore
import Foundation
import PostgresNIO

/// Blobs on PostgreSQL, in the database so that every instance serves them: `blobs` (those stored
/// whole), `blob_parts` (their bytes, in parts of `PostgresBlobUpload.partSize`) and `blob_refs`
/// (which blobs each record's current version references). An upload writes its parts under a
/// staging key of its own and moves them under the hash, with the `blobs` row, in one transaction
/// once the bytes match the name, so a blob is visible whole or not at all.
extension PostgresStore {
    /// The row of `hash` in `blobs`: it is whole.
    public func blob(_ hash: BlobHash) async throws -> StoredBlob? {
        try await withReader { connection in try await storedBlob(hash, connection) }
    }

    /// An upload that stages its parts and publishes them on `finish` (`PostgresBlobUpload`).
    public func beginUpload(_ hash: BlobHash, type: String, maximumBytes: Int64, uploader: String?) async throws -> any BlobUpload {
        PostgresBlobUpload(store: self, hash: hash, type: type, maximumBytes: maximumBytes, uploader: uploader)
    }

    /// A reading of the clamped range, one part at a time (`PostgresBlobReading`).
    public func openBlob(_ hash: BlobHash, range: Range<Int64>) async throws -> (any BlobReading)? {
        guard let stored = try await blob(hash) else { return nil }
        let clamped = min(max(range.lowerBound, 0), stored.size)..<min(max(range.upperBound, 0), stored.size)
        return PostgresBlobReading(blob: stored, store: self, range: clamped)
    }

    /// The visible rows whose current version references `hash`, by collection and id.
    public func referrers(of hash: BlobHash, in collections: [CollectionName]?, limit: Int) async throws -> [BlobReferrer] {
        var binds = PostgresBindings(capacity: 3)
        binds.append(hash.hex)
        binds.append(Int64(max(limit, 0)))
        if let collections { binds.append(collections.map(\.rawValue)) }
        let sql = """
            SELECT r.collection, r.id, r.body FROM deltasnap.blob_refs b
            JOIN deltasnap.records r ON r.collection = b.collection AND r.id = b.id
            WHERE b.hash = $1 AND NOT r.hidden\(collections == nil ? "" : " AND b.collection = ANY($3)")
            ORDER BY b.collection, b.id LIMIT $2
            """
        return try await withReader { connection in
            var found: [BlobReferrer] = []
            for try await row in try await query(connection, sql, binds) {
                let (collection, id, body) = try row.decode((String, String, ByteBuffer).self)
                guard let name = try? CollectionName(collection) else { continue }
                found.append(BlobReferrer(collection: name, record: Record(id: id, hidden: false, canonicalBody: Array(buffer: body))))
            }
            return found
        }
    }

    /// Whether `hash` has a row in `blobs` and, with a `user`, one in `blob_uploaders` for them.
    public func holds(_ hash: BlobHash, uploadedBy user: String?) async throws -> Bool {
        var binds = PostgresBindings(capacity: 2)
        binds.append(hash.hex)
        binds.append(user)
        let sql = """
            SELECT 1 FROM deltasnap.blobs b WHERE b.hash = $1
            AND ($2::text IS NULL OR EXISTS (SELECT 1 FROM deltasnap.blob_uploaders u WHERE u.hash = $1 AND u."user" = $2))
            """
        return try await withReader { connection in
            for try await _ in try await query(connection, sql, binds) { return true }
            return false
        }
    }

    /// How many rows `blobs` has, and their sizes summed.
    public func blobTotals() async throws -> (blobs: Int, bytes: Int64) {
        try await withReader { connection in
            for try await row in try await query(connection, "SELECT count(*), coalesce(sum(size), 0)::bigint FROM deltasnap.blobs") {
                let (blobs, bytes) = try row.decode((Int64, Int64).self)
                return (Int(blobs), bytes)
            }
            return (0, 0)
        }
    }

    /// The row of `hash` in `blobs`, read on `connection`.
    func storedBlob(_ hash: BlobHash, _ connection: PostgresConnection) async throws -> StoredBlob? {
        var binds = PostgresBindings(capacity: 1)
        binds.append(hash.hex)
        for try await row in try await query(connection, "SELECT size, type FROM deltasnap.blobs WHERE hash = $1", binds) {
            let (size, type) = try row.decode((Int64, String).self)
            return StoredBlob(hash: hash, size: size, type: type)
        }
        return nil
    }

    /// Makes an upload's staged parts the blob `hash`, in one transaction: the `blobs` row
    /// (unless another upload stored it first, whose row then stands and whose parts stay) and
    /// the parts moved under the hash (an `UPDATE` of the key: PostgreSQL keeps the bytes where
    /// they are). Staging older than a day, left by uploads that never ended, goes too.
    func publishBlob(_ hash: BlobHash, type: String, size: Int64, staging: String, parts: Int, uploader: String?) async throws -> StoredBlob {
        try await withBlobTransaction { connection in
            if let uploader {
                var binds = PostgresBindings(capacity: 2)
                binds.append(hash.hex)
                binds.append(uploader)
                let sql = "INSERT INTO deltasnap.blob_uploaders(hash, \"user\") VALUES ($1, $2) ON CONFLICT DO NOTHING"
                for try await _ in try await query(connection, sql, binds) {}
            }
            var binds = PostgresBindings(capacity: 4)
            binds.append(hash.hex)
            binds.append(size)
            binds.append(type)
            binds.append(PostgresBlobUpload.stagingKey(startedAt: Date().addingTimeInterval(-86_400), id: ""))
            let insert = """
                WITH stale AS (DELETE FROM deltasnap.blob_parts WHERE hash > 'upload/' AND hash < $4)
                INSERT INTO deltasnap.blobs(hash, size, type, stored_at)
                SELECT $1, $2, $3, coalesce(max(position), 0) + 1 FROM deltasnap.commits
                ON CONFLICT (hash) DO NOTHING RETURNING 1
                """
            var inserted = false
            for try await _ in try await query(connection, insert, binds) { inserted = true }
            var keys = PostgresBindings(capacity: 2)
            keys.append(hash.hex)
            keys.append(staging)
            guard inserted else {
                // Stored already (or just now, by a concurrent upload this insert waited for).
                let existing = "WITH gone AS (DELETE FROM deltasnap.blob_parts WHERE hash = $2) SELECT size, type FROM deltasnap.blobs WHERE hash = $1"
                for try await row in try await query(connection, existing, keys) {
                    let (size, type) = try row.decode((Int64, String).self)
                    return StoredBlob(hash: hash, size: size, type: type)
                }
                throw StoreError(.corrupt, "blob \(hash)", "its row is missing right after an insert found it")
            }
            // Parts a blob without a row left behind would collide with the moved ones.
            for try await _ in try await query(connection, "DELETE FROM deltasnap.blob_parts WHERE hash = $1", keys) {}
            var moved = 0
            let move = "WITH moved AS (UPDATE deltasnap.blob_parts SET hash = $1 WHERE hash = $2 RETURNING 1) SELECT count(*) FROM moved"
            for try await row in try await query(connection, move, keys) { moved = Int(try row.decode(Int64.self)) }
            guard moved == parts else {
                throw StoreError(
                    .unavailable, "blob \(hash)", "the upload's staged parts were removed before it finished", evidence: "\(moved) of \(parts) parts left")
            }
            return StoredBlob(hash: hash, size: size, type: type)
        }
    }

    /// Runs one statement for blobs on a reader connection, outside any transaction.
    func runBlobStatement(_ sql: String, _ binds: PostgresBindings) async throws {
        try await withReader { connection in
            for try await _ in try await query(connection, sql, binds) {}
        }
    }

    /// The bytes of part `part` of `hash` from `offset` within it, `count` of them (fewer when
    /// the part is shorter or missing).
    func blobBytes(_ hash: BlobHash, part: Int32, offset: Int32, count: Int32) async throws -> [UInt8] {
        try await blobBytes(key: hash.hex, part: part, offset: offset, count: count)
    }

    /// The bytes of part `part` under `key` (a hash, or an upload's staging key), as above.
    func blobBytes(key: String, part: Int32, offset: Int32, count: Int32) async throws -> [UInt8] {
        var binds = PostgresBindings(capacity: 4)
        binds.append(key)
        binds.append(part)
        binds.append(offset + 1)
        binds.append(count)
        return try await withReader { connection in
            let sql = "SELECT substring(bytes FROM $3 FOR $4) FROM deltasnap.blob_parts WHERE hash = $1 AND part = $2"
            for try await row in try await query(connection, sql, binds) { return Array(buffer: try row.decode(ByteBuffer.self)) }
            return []
        }
    }

    /// Runs `body` in a transaction on a reader connection (blobs need no write lock).
    func withBlobTransaction<T>(_ body: (PostgresConnection) async throws -> T) async throws -> T {
        let connection = try await checkoutReader()
        do {
            try await execute(connection, "BEGIN")
            let value = try await body(connection)
            try await execute(connection, "COMMIT")
            readers.checkin(connection)
            return value
        } catch {
            await release(connection, to: readers, failed: true)
            throw failure(error)
        }
    }
}

extension PostgresWriteTransaction {
    /// Which of `hashes` have a row in `blobs`, locked against deletion until this transaction ends.
    func heldBlobs(_ hashes: [BlobHash], uploadedBy user: String?) async throws -> Set<BlobHash> {
        guard !hashes.isEmpty else { return [] }
        var binds = PostgresBindings(capacity: 2)
        binds.append(hashes.map(\.hex))
        binds.append(user)
        var held = Set<BlobHash>()
        let sql = """
            SELECT b.hash FROM deltasnap.blobs b WHERE b.hash = ANY($1)
            AND ($2::text IS NULL OR EXISTS (SELECT 1 FROM deltasnap.blob_uploaders u WHERE u.hash = b.hash AND u."user" = $2))
            FOR KEY SHARE OF b
            """
        do {
            // FOR KEY SHARE: a compaction that would delete one of these rows waits for this commit.
            for try await row in try await store.query(connection, sql, binds) {
                held.insert(try BlobHash(try row.decode(String.self)))
            }
        } catch {
            throw store.failure(error)
        }
        return held
    }

    /// Keeps which blobs the changed `records` reference (the trigger dropped the references of
    /// the versions they replace): one statement, sent only when one of them holds a reference.
    func keepBlobReferences(_ records: some Sequence<Record>) async throws {
        var hashes: [String] = []
        var ids: [String] = []
        for record in records where record.body.containsBlobMarker {
            for reference in (try? record.blobReferences()) ?? [] {
                hashes.append(reference.hash.hex)
                ids.append(record.id)
            }
        }
        guard !hashes.isEmpty else { return }
        var binds = PostgresBindings(capacity: 3)
        binds.append(collection.rawValue)
        binds.append(hashes)
        binds.append(ids)
        let sql = """
            INSERT INTO deltasnap.blob_refs(hash, collection, id) SELECT h, $1, i FROM unnest($2::text[], $3::text[]) AS t(h, i)
            ON CONFLICT DO NOTHING
            """
        do {
            for try await _ in try await store.query(connection, sql, binds) {}
        } catch {
            throw store.failure(error)
        }
    }
}

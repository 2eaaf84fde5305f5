import DeltaCore
import DeltaStore
import Foundation
import PostgresNIO

/// Resumable uploads on PostgreSQL. A suspended upload's whole parts are moved, in one
/// transaction, to the key `upload/<now>/kept-<holder's digest>-<hash>` (an older kept upload of
/// the same holder and blob goes): a staging key, so that the day-old cleanup of
/// `PostgresStore.publishBlob` removes it too. Resuming moves the newest kept parts to the
/// upload's own staging key in one `UPDATE`, so that of two uploads resuming at once only one
/// gets them, then hashes them again. The last part, shorter than a whole one, is not kept: the
/// client sends it again.
extension PostgresBlobUpload {
    /// The kept uploads of `holder` and `hash`, as a `LIKE` pattern over staging keys.
    static func keptPattern(_ hash: BlobHash, holder: String) -> String { "upload/%/" + keptUploadName(hash, holder: holder) }

    /// The staging keys (one range of the primary key) that match the kept pattern `$1`.
    static let keptKeys = "hash > 'upload/' AND hash < 'upload0' AND hash LIKE $1"

    /// The number of parts under the newest key matching `$1`.
    static let keptCount = "SELECT count(*) FROM deltasnap.blob_parts WHERE hash = (SELECT max(hash) FROM deltasnap.blob_parts WHERE \(keptKeys))"

    /// Takes the kept parts when there are `offset` bytes of them, and hashes them again;
    /// `StoreError(.uploadOffset)` otherwise, leaving them kept.
    func resume(at offset: Int64) async throws {
        guard let holder else { return }
        var binds = PostgresBindings(capacity: 2)
        binds.append(Self.keptPattern(hash, holder: holder))
        binds.append(staging)
        let claim = """
            WITH kept AS (SELECT max(hash) AS key FROM deltasnap.blob_parts WHERE \(Self.keptKeys)),
            moved AS (UPDATE deltasnap.blob_parts SET hash = $2 WHERE hash = (SELECT key FROM kept) RETURNING part)
            SELECT (SELECT key FROM kept), count(*), coalesce(max(part), -1) FROM moved
            """
        var (key, count, last): (String?, Int64, Int32) = (nil, 0, -1)
        try await store.withBlobTransaction { connection in
            for try await row in try await store.query(connection, claim, binds) { (key, count, last) = try row.decode((String?, Int64, Int32).self) }
        }
        staged = count > 0
        let kept = Int64(last) + 1 == count ? count * Int64(Self.partSize) : 0
        guard kept == offset, kept > 0 else {
            if let key, staged { try? await moveParts(to: key) }
            staged = false
            throw StoreError.uploadOffset(hash, offset: offset, kept: kept)
        }
        do {
            for part in 0..<Int32(count) {
                let bytes = try await store.blobBytes(key: staging, part: part, offset: 0, count: Int32(Self.partSize))
                guard bytes.count == Self.partSize else {
                    throw StoreError(.unavailable, "blob \(hash)", "a kept part went while it was read", evidence: "part \(part): \(bytes.count) bytes")
                }
                await digest.update(bytes)
            }
        } catch {
            await cancel()
            throw error
        }
        (parts, written) = (Int(count), kept)
    }

    /// Keeps the whole parts written for the holder; without one, or with none, cancels.
    func suspend() async {
        guard let holder, !ended else { return await cancel() }
        // The part being written is a whole one: it is kept too, once written (a failure cancels).
        guard (try? await settle()) != nil else { return }
        guard parts > 0 else { return await cancel() }
        ended = true
        buffer = []
        let key = Self.stagingKey(startedAt: Date(), id: keptUploadName(hash, holder: holder))
        var older = PostgresBindings(capacity: 1)
        older.append(Self.keptPattern(hash, holder: holder))
        do {
            try await store.withBlobTransaction { connection in
                let drop = "DELETE FROM deltasnap.blob_parts WHERE \(Self.keptKeys)"
                for try await _ in try await store.query(connection, drop, older) {}
                try await moveParts(to: key, on: connection)
            }
            staged = false
        } catch {
            ended = false
            await cancel()
        }
    }

    /// Moves the parts under `staging` to `key`, on `connection` or a reader of its own.
    private func moveParts(to key: String, on connection: PostgresConnection? = nil) async throws {
        var binds = PostgresBindings(capacity: 2)
        binds.append(key)
        binds.append(staging)
        let sql = "UPDATE deltasnap.blob_parts SET hash = $1 WHERE hash = $2"
        if let connection {
            for try await _ in try await store.query(connection, sql, binds) {}
        } else {
            try await store.runBlobStatement(sql, binds)
        }
    }
}

extension PostgresStore {
    /// An upload resumable by `holder`, continuing what is kept at `offset` (`PostgresBlobUpload+Resume`).
    public func beginUpload(
        _ hash: BlobHash, type: String, maximumBytes: Int64, uploader: String?, holder: String, offset: Int64
    ) async throws -> any BlobUpload {
        let upload = PostgresBlobUpload(store: self, hash: hash, type: type, maximumBytes: maximumBytes, uploader: uploader, holder: holder)
        if offset > 0 { try await upload.resume(at: offset) }
        return upload
    }

    /// The bytes kept for `holder`: the newest kept key's parts, each `PostgresBlobUpload.partSize`.
    public func keptUpload(_ hash: BlobHash, holder: String) async throws -> Int64 {
        var binds = PostgresBindings(capacity: 1)
        binds.append(PostgresBlobUpload.keptPattern(hash, holder: holder))
        return try await withReader { connection in
            for try await row in try await query(connection, PostgresBlobUpload.keptCount, binds) {
                return try row.decode(Int64.self) * Int64(PostgresBlobUpload.partSize)
            }
            return 0
        }
    }
}

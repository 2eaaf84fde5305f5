public import DeltaCore
import DeltaSQLite
public import DeltaStore
public import Foundation

/// `Compaction` on SQLite: one `BEGIN IMMEDIATE` transaction on the writer connection, so it is
/// ordered with every write; readers keep their WAL snapshots, so a read that began before it
/// finishes as if it had not happened.
extension SQLiteStore {
    /// Records that snapshots were baked at these tokens.
    public func recordBakes(_ tokens: [(collection: CollectionName, token: Token)]) async throws {
        let connection = try await writer.checkout()
        defer { writer.checkin(connection) }
        let now = Int64(Date().timeIntervalSince1970)
        try sqlite {
            try connection.transaction(.immediate) {
                for (collection, token) in tokens {
                    try connection.statement("INSERT OR REPLACE INTO baked(collection, position, etag, baked_at) VALUES (?, ?, ?, ?)")
                        .run(.text(collection.rawValue), .integer(Int64(token.position)), .text(token.entityTag), .integer(now))
                }
            }
        }
    }

    /// The bakes recorded, oldest first.
    public func bakes() async throws -> [BakedSnapshot] {
        let connection = try await readers.checkout()
        defer { readers.checkin(connection) }
        return try sqlite { try Self.bakes(connection) }
    }

    static func bakes(_ connection: Connection) throws -> [BakedSnapshot] {
        let statement = try connection.statement("SELECT collection, position, etag, baked_at FROM baked ORDER BY position, collection, etag")
        defer { statement.reset() }
        var bakes: [BakedSnapshot] = []
        while try statement.step() {
            bakes.append(
                BakedSnapshot(
                    collection: try CollectionName(statement.string(0)), entityTag: statement.string(2),
                    position: UInt64(clamping: statement.int64(1)), bakedAt: Date(timeIntervalSince1970: TimeInterval(statement.int64(3)))))
        }
        return bakes
    }

    /// The newest position committed before `date`.
    public func position(committedBefore date: Date) async throws -> UInt64 {
        let connection = try await readers.checkout()
        defer { readers.checkin(connection) }
        return try sqlite {
            UInt64(
                clamping: try connection.integer(
                    "SELECT coalesce(max(position), 0) FROM commits WHERE committed_at <= ?",
                    .integer(Int64(clamping: Int(exactly: date.timeIntervalSince1970.rounded(.down)) ?? (date.timeIntervalSince1970 < 0 ? .min : .max)))) ?? 0)
        }
    }

    /// Drops hidden records and superseded versions at or before the horizon, and sets it.
    public func compact(before position: UInt64, dropBaked: Bool, dryRun: Bool) async throws -> CompactionReport {
        let connection = try await writer.checkout()
        defer { writer.checkin(connection) }
        return try sqlite {
            try connection.execute("BEGIN IMMEDIATE")
            do {
                let current = UInt64(clamping: try connection.integer("SELECT CAST(value AS INTEGER) FROM meta WHERE key = 'horizon'") ?? 0)
                let head = UInt64(clamping: try connection.integer("SELECT coalesce(max(position), 0) FROM commits") ?? 0)
                let plan = Compaction.plan(asked: min(position, head), current: current, baked: try Self.bakes(connection), dropBaked: dropBaked)
                let horizon = Int64(plan.horizon)
                // Of a record's superseded versions, the newest at or before the horizon stays
                // (unless hidden, or the current version is itself at or before it).
                try connection.statement(
                    """
                    DELETE FROM superseded WHERE position <= ?1 AND (hidden = 1
                        OR EXISTS (SELECT 1 FROM superseded n WHERE n.collection = superseded.collection AND n.id = superseded.id
                                   AND n.position > superseded.position AND n.position <= ?1)
                        OR EXISTS (SELECT 1 FROM records r WHERE r.collection = superseded.collection AND r.id = superseded.id AND r.position <= ?1))
                    """
                ).run(.integer(horizon))
                let versions = connection.changes
                try connection.statement(
                    """
                    DELETE FROM push_writers WHERE EXISTS (SELECT 1 FROM records r WHERE r.collection = push_writers.collection
                        AND r.id = push_writers.id AND r.hidden = 1 AND r.position <= ?1
                        AND r.position < (SELECT max(m.position) FROM records m WHERE m.collection = r.collection))
                    """
                ).run(.integer(horizon))
                // A collection's newest record stays, hidden or not: its position is the collection's
                // token, which must never move back (behind the horizon, it would expire its readers).
                try connection.statement(
                    """
                    DELETE FROM records WHERE hidden = 1 AND position <= ?1
                        AND position < (SELECT max(m.position) FROM records m WHERE m.collection = records.collection)
                    """
                ).run(.integer(horizon))
                let hidden = connection.changes
                try connection.statement("INSERT OR REPLACE INTO meta(key, value) VALUES ('horizon', ?)").run(.text(String(horizon)))
                try connection.statement("DELETE FROM baked WHERE position < ?").run(.integer(horizon))
                let blobs = try dropUnreferencedBlobs(connection, horizon: horizon)
                try connection.execute(dryRun ? "ROLLBACK" : "COMMIT")
                if !dryRun { removeBlobFiles(blobs.map(\.hash)) }
                var report = CompactionReport(
                    previousHorizon: current, horizon: plan.horizon, droppedHidden: hidden, droppedVersions: versions,
                    keptFor: plan.keptFor, expiredBakes: plan.expired, dryRun: dryRun)
                report.droppedBlobs = blobs.count
                report.droppedBlobBytes = blobs.reduce(0) { $0 + $1.size }
                return report
            } catch {
                try? connection.execute("ROLLBACK")
                throw error
            }
        }
    }

    /// Deletes the rows of blobs stored at or before the horizon that no row references any more
    /// (the hidden records just dropped took their references with them), and returns them.
    private func dropUnreferencedBlobs(_ connection: Connection, horizon: Int64) throws -> [(hash: BlobHash, size: Int64)] {
        let select = try connection.statement(
            "SELECT hash, size FROM blobs WHERE stored_at <= ? AND NOT EXISTS (SELECT 1 FROM blob_refs r WHERE r.hash = blobs.hash)")
        defer { select.reset() }
        try select.bind([.integer(horizon)])
        var dropped: [(hash: BlobHash, size: Int64)] = []
        while try select.step() {
            guard let hash = try? BlobHash(select.string(0)) else { continue }
            dropped.append((hash, select.int64(1)))
        }
        let delete = try connection.statement("DELETE FROM blobs WHERE hash = ?")
        let uploaders = try connection.statement("DELETE FROM blob_uploaders WHERE hash = ?")
        for blob in dropped {
            try delete.run(.text(blob.hash.hex))
            try uploaders.run(.text(blob.hash.hex))
        }
        return dropped
    }

    /// Removes dropped blobs' files once their rows are gone (a crash in between leaves files no
    /// row names, which are never served).
    private func removeBlobFiles(_ hashes: [BlobHash]) {
        for hash in hashes { try? FileManager.default.removeItem(atPath: FileBlobUpload.path(of: hash, in: blobDirectory)) }
    }
}

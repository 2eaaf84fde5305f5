public import DeltaCore
public import DeltaStore
public import Foundation
import PostgresNIO

/// `Compaction` on PostgreSQL: one transaction holding the write lock, so it is ordered with every
/// write on every instance; REPEATABLE READ readers keep their snapshots.
extension PostgresStore {
    /// Records that snapshots were baked at these tokens.
    public func recordBakes(_ tokens: [(collection: CollectionName, token: Token)]) async throws {
        try await withWriter { connection in
            for (collection, token) in tokens {
                var binds = PostgresBindings(capacity: 4)
                binds.append(collection.rawValue)
                binds.append(Int64(token.position))
                binds.append(token.entityTag)
                binds.append(Int64(Date().timeIntervalSince1970))
                let sql = "INSERT INTO deltasnap.baked(collection, position, etag, baked_at) VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING"
                for try await _ in try await query(connection, sql, binds) {}
            }
        }
    }

    /// The bakes recorded, oldest first.
    public func bakes() async throws -> [BakedSnapshot] {
        try await withWriter { connection in try await bakes(connection) }
    }

    private func bakes(_ connection: PostgresConnection) async throws -> [BakedSnapshot] {
        var bakes: [BakedSnapshot] = []
        let sql = "SELECT collection, position, etag, baked_at FROM deltasnap.baked ORDER BY position, collection, etag"
        for try await row in try await query(connection, sql) {
            let (collection, position, etag, at) = try row.decode((String, Int64, String, Int64).self)
            bakes.append(
                BakedSnapshot(
                    collection: try CollectionName(collection), entityTag: etag, position: UInt64(clamping: position),
                    bakedAt: Date(timeIntervalSince1970: TimeInterval(at))))
        }
        return bakes
    }

    /// The newest position committed before `date`.
    public func position(committedBefore date: Date) async throws -> UInt64 {
        try await withWriter { connection in
            var binds = PostgresBindings(capacity: 1)
            binds.append(Int64(clamping: Int(exactly: date.timeIntervalSince1970.rounded(.down)) ?? (date.timeIntervalSince1970 < 0 ? .min : .max)))
            for try await row in try await query(connection, "SELECT coalesce(max(position), 0) FROM deltasnap.commits WHERE committed_at <= $1", binds) {
                return UInt64(clamping: try row.decode(Int64.self))
            }
            return 0
        }
    }

    /// Drops hidden records and superseded versions at or before the horizon, and sets it.
    public func compact(before position: UInt64, dropBaked: Bool, dryRun: Bool) async throws -> CompactionReport {
        try await withWriter { connection in
            var current: UInt64 = 0
            var head: UInt64 = 0
            let facts = "SELECT (SELECT value::bigint FROM deltasnap.meta WHERE key = 'horizon'), (SELECT coalesce(max(position), 0) FROM deltasnap.commits)"
            for try await row in try await query(connection, facts) {
                let (horizon, newest) = try row.decode((Int64?, Int64).self)
                (current, head) = (UInt64(clamping: horizon ?? 0), UInt64(clamping: newest))
            }
            let plan = Compaction.plan(asked: min(position, head), current: current, baked: try await bakes(connection), dropBaked: dropBaked)
            var binds = PostgresBindings(capacity: 1)
            binds.append(Int64(plan.horizon))
            func count(_ sql: String) async throws -> Int {
                var total = 0
                for try await row in try await query(connection, sql, binds) { total = Int(try row.decode(Int64.self)) }
                return total
            }
            // Of a record's superseded versions, the newest at or before the horizon stays
            // (unless hidden, or the current version is itself at or before it).
            let versions = try await count(
                """
                WITH gone AS (DELETE FROM deltasnap.superseded s WHERE s.position <= $1 AND (s.hidden
                    OR EXISTS (SELECT 1 FROM deltasnap.superseded n WHERE n.collection = s.collection AND n.id = s.id
                               AND n.position > s.position AND n.position <= $1)
                    OR EXISTS (SELECT 1 FROM deltasnap.records r WHERE r.collection = s.collection AND r.id = s.id AND r.position <= $1))
                    RETURNING 1)
                SELECT count(*) FROM gone
                """)
            _ = try await count(
                """
                WITH gone AS (DELETE FROM deltasnap.push_writers w USING deltasnap.records r
                    WHERE r.collection = w.collection AND r.id = w.id AND r.hidden AND r.position <= $1
                    AND r.position < (SELECT max(m.position) FROM deltasnap.records m WHERE m.collection = r.collection) RETURNING 1)
                SELECT count(*) FROM gone
                """)
            // A collection's newest record stays, hidden or not: its position is the collection's
            // token, which must never move back (behind the horizon, it would expire its readers).
            let hidden = try await count(
                """
                WITH gone AS (DELETE FROM deltasnap.records r WHERE r.hidden AND r.position <= $1
                    AND r.position < (SELECT max(m.position) FROM deltasnap.records m WHERE m.collection = r.collection) RETURNING 1)
                SELECT count(*) FROM gone
                """)
            _ = try await count(
                """
                WITH moved AS (INSERT INTO deltasnap.meta(key, value) VALUES ('horizon', $1::text) ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value RETURNING 1),
                     gone AS (DELETE FROM deltasnap.baked WHERE position < $1 RETURNING 1)
                SELECT count(*) FROM gone
                """)
            // Blobs stored at or before the horizon that no row references any more (the hidden
            // records just dropped took their references with them), with their parts.
            var blobs: (count: Int, bytes: Int64) = (0, 0)
            let dropBlobs = """
                WITH gone AS (DELETE FROM deltasnap.blobs b WHERE b.stored_at <= $1
                        AND NOT EXISTS (SELECT 1 FROM deltasnap.blob_refs r WHERE r.hash = b.hash) RETURNING b.hash, b.size),
                     parts AS (DELETE FROM deltasnap.blob_parts p USING gone WHERE p.hash = gone.hash RETURNING 1),
                     uploaders AS (DELETE FROM deltasnap.blob_uploaders u USING gone WHERE u.hash = gone.hash RETURNING 1)
                SELECT count(*), coalesce(sum(size), 0)::bigint FROM gone
                """
            for try await row in try await query(connection, dropBlobs, binds) {
                let (count, bytes) = try row.decode((Int64, Int64).self)
                blobs = (Int(count), bytes)
            }
            var report = CompactionReport(
                previousHorizon: current, horizon: plan.horizon, droppedHidden: hidden, droppedVersions: versions,
                keptFor: plan.keptFor, expiredBakes: plan.expired, dryRun: dryRun)
            report.droppedBlobs = blobs.count
            report.droppedBlobBytes = blobs.bytes
            if dryRun { throw DryRun(report: report) }
            return report
        }
    }

    /// Runs `body` in one transaction holding the write lock; a `DryRun` rolls it back and returns its report.
    func withWriter<T: Sendable>(_ body: (PostgresConnection) async throws -> T) async throws -> T {
        let connection = try await writers.checkout()
        do {
            try await execute(connection, "BEGIN")
            try await execute(connection, "SELECT pg_advisory_xact_lock(\(Self.writeLock))")
            let value = try await body(connection)
            try await execute(connection, "COMMIT")
            writers.checkin(connection)
            return value
        } catch let dry as DryRun {
            try await execute(connection, "ROLLBACK")
            writers.checkin(connection)
            guard let report = dry.report as? T else { throw failure(dry) }
            return report
        } catch {
            await release(connection, to: writers, failed: true)
            throw failure(error)
        }
    }
}

/// A dry run's report, thrown to roll its transaction back.
private struct DryRun: Error {
    let report: CompactionReport
}

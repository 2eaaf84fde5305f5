public import DeltaCore
public import DeltaStore
import Foundation
import PostgresNIO

/// `StoreInspection` on PostgreSQL: each call one statement on a reader connection (one
/// snapshot), never under the write lock.
extension PostgresStore {
    /// Every collection that holds a record: one pass over `records`.
    public func collectionStatistics() async throws -> [CollectionStatistics] {
        try await withReader { connection in
            let sql = """
                SELECT s.collection, s.total - s.hidden, s.hidden, s.bytes, s.last, c.committed_at FROM (
                    SELECT collection, count(*) AS total, count(*) FILTER (WHERE hidden) AS hidden,
                           coalesce(sum(octet_length(body)), 0)::bigint AS bytes, max(position) AS last
                    FROM deltasnap.records GROUP BY collection) s
                LEFT JOIN deltasnap.commits c ON c.position = s.last ORDER BY s.collection
                """
            var statistics: [CollectionStatistics] = []
            for try await row in try await query(connection, sql) {
                let (name, visible, hidden, bytes, last, committed) = try row.decode((String, Int64, Int64, Int64, Int64, Int64?).self)
                statistics.append(
                    CollectionStatistics(
                        name: try CollectionName(name), visible: Int(visible), hidden: Int(hidden), bytes: bytes, lastPosition: UInt64(clamping: last),
                        lastChange: committed.map { Date(timeIntervalSince1970: TimeInterval($0)) }))
            }
            return statistics
        }
    }

    /// A page of `collection`'s records in id order, hidden ones too, bounded by count and bytes:
    /// the running total of the bodies' sizes is computed without reading them (`octet_length`
    /// of a stored value reads its header), and only the rows within the budget are sent.
    public func recordPage(_ collection: CollectionName, after id: String?, limit: Int, maximumBytes: Int) async throws -> [PagedRecord] {
        try await withReader { connection in
            var binds = PostgresBindings(capacity: 4)
            binds.append(collection.rawValue)
            binds.append(id)
            binds.append(Int64(max(0, limit)))
            binds.append(Int64(maximumBytes))
            let sql = """
                SELECT r.id, r.hidden, r.body, r.position FROM (
                    SELECT id, sum(octet_length(body)) OVER (ORDER BY id ROWS UNBOUNDED PRECEDING) AS running,
                           row_number() OVER (ORDER BY id) AS n
                    FROM (SELECT id, body FROM deltasnap.records WHERE collection = $1 AND ($2::text IS NULL OR id > $2) ORDER BY id LIMIT $3) l) w
                JOIN deltasnap.records r ON r.collection = $1 AND r.id = w.id
                WHERE w.running <= $4 OR w.n = 1 ORDER BY r.id
                """
            var page: [PagedRecord] = []
            for try await row in try await query(connection, sql, binds) {
                let (id, hidden, body, position) = try row.decode((String, Bool, ByteBuffer, Int64).self)
                page.append(
                    PagedRecord(record: Record(id: id, hidden: hidden, canonicalBody: Array(body.readableBytesView)), position: UInt64(clamping: position)))
            }
            return page
        }
    }

    /// The kept versions of one record, newest first, in one statement, bounded by count and
    /// bytes (the running total from `octet_length`, without reading the bodies past it).
    public func history(of id: String, in collection: CollectionName, limit: Int, maximumBytes: Int) async throws -> [RecordVersion] {
        try await withReader { connection in
            var binds = PostgresBindings(capacity: 4)
            binds.append(collection.rawValue)
            binds.append(id)
            binds.append(Int64(max(0, limit)))
            binds.append(Int64(maximumBytes))
            let sql = """
                WITH v AS (
                    SELECT position, hidden, octet_length(body) AS size, true AS current FROM deltasnap.records WHERE collection = $1 AND id = $2
                    UNION ALL
                    SELECT position, hidden, octet_length(body), false FROM deltasnap.superseded WHERE collection = $1 AND id = $2
                    ORDER BY position DESC LIMIT $3),
                w AS (SELECT *, sum(size) OVER (ORDER BY position DESC ROWS UNBOUNDED PRECEDING) AS running,
                             row_number() OVER (ORDER BY position DESC) AS n FROM v)
                SELECT w.position, c.committed_at, w.hidden, coalesce(r.body, s.body), w.current FROM w
                LEFT JOIN deltasnap.records r ON w.current AND r.collection = $1 AND r.id = $2
                LEFT JOIN deltasnap.superseded s ON NOT w.current AND s.collection = $1 AND s.id = $2 AND s.position = w.position
                LEFT JOIN deltasnap.commits c ON c.position = w.position
                WHERE w.running <= $4 OR w.n = 1 ORDER BY w.position DESC
                """
            var versions: [RecordVersion] = []
            for try await row in try await query(connection, sql, binds) {
                let (position, committed, hidden, body, current) = try row.decode((Int64, Int64?, Bool, ByteBuffer, Bool).self)
                versions.append(
                    RecordVersion(
                        position: UInt64(clamping: position), time: committed.map { Date(timeIntervalSince1970: TimeInterval($0)) }, hidden: hidden,
                        body: Array(body.readableBytesView), current: current))
            }
            return versions
        }
    }

    /// The newest logged mutations `query` matches (see `MutationPage`).
    public func recentMutations(_ query: MutationQuery) async throws -> MutationPage {
        try await withReader { connection in
            var binds = PostgresBindings(capacity: 5)
            binds.append(Int64(clamping: query.before ?? UInt64(Int64.max)))
            binds.append(Int64(MutationPage.rowsExamined))
            binds.append(query.collection?.rawValue)
            binds.append(query.user)
            binds.append(query.client)
            let sql = """
                WITH floor AS (
                    SELECT coalesce((SELECT position FROM deltasnap.mutation_log WHERE position < $1 ORDER BY position DESC LIMIT 1 OFFSET $2), 0) AS position)
                SELECT floor.position, m.position, m.logged_at, m.collection, m.id, m."user", m.client, m.mutation, m.operation
                FROM floor LEFT JOIN deltasnap.mutation_log m
                  ON m.position < $1 AND m.position >= floor.position
                 AND ($3::text IS NULL OR m.collection = $3) AND ($4::text IS NULL OR m."user" = $4) AND ($5::text IS NULL OR m.client = $5)
                ORDER BY m.position DESC, m.client DESC, m.mutation DESC
                """
            var page = MutationPage.Builder(limit: query.limit)
            var full = false
            // Every row is read (at most a scan's worth), so that the connection goes back to the pool idle.
            for try await row in try await self.query(connection, sql, binds) where !full {
                let (floor, position, time, collection, id, user, client, mutation, operation) = try row.decode(
                    (Int64, Int64?, Int64?, String?, String?, String?, String?, Int64?, String?).self)
                page.floor = UInt64(clamping: floor)
                guard let position, let time, let collection, let id, let client, let mutation, let operation else { continue }
                let logged = LoggedMutation(
                    position: UInt64(clamping: position), time: time, collection: collection, id: id, user: user, client: client,
                    mutation: UInt64(clamping: mutation), operation: operation)
                full = !page.add(logged)
            }
            return page.page
        }
    }

    /// The records changed last: each collection's newest by `records_by_position`, merged, in one statement.
    public func recentChanges(in collection: CollectionName?, before: UInt64?, limit: Int) async throws -> [RecentChange] {
        try await withReader { connection in
            var binds = PostgresBindings(capacity: 3)
            binds.append(collection?.rawValue)
            binds.append(Int64(clamping: before ?? UInt64(Int64.max)))
            binds.append(Int64(max(0, limit)))
            let sql = """
                SELECT d.collection, r.id, r.hidden, r.position, c.committed_at
                FROM deltasnap.digests d
                CROSS JOIN LATERAL (
                    SELECT id, hidden, position FROM deltasnap.records
                    WHERE collection = d.collection AND position < $2 ORDER BY position DESC, id DESC LIMIT $3) r
                LEFT JOIN deltasnap.commits c ON c.position = r.position
                WHERE $1::text IS NULL OR d.collection = $1
                ORDER BY r.position DESC, d.collection DESC, r.id DESC LIMIT $3
                """
            var changes: [RecentChange] = []
            for try await row in try await query(connection, sql, binds) {
                let (name, id, hidden, position, committed) = try row.decode((String, String, Bool, Int64, Int64?).self)
                changes.append(
                    RecentChange(
                        collection: try CollectionName(name), id: id, hidden: hidden, position: UInt64(clamping: position),
                        time: committed.map { Date(timeIntervalSince1970: TimeInterval($0)) }))
            }
            return changes
        }
    }

    /// The compaction horizon.
    public func historyHorizon() async throws -> UInt64 {
        try await withReader { connection in
            for try await row in try await query(connection, "SELECT coalesce((SELECT value::bigint FROM deltasnap.meta WHERE key = 'horizon'), 0)") {
                return UInt64(clamping: try row.decode(Int64.self))
            }
            return 0
        }
    }
}

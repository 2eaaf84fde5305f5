public import DeltaCore
import DeltaSQLite
public import DeltaStore
import Foundation

/// `StoreInspection` on SQLite: each call one statement on a reader connection, so it reads one
/// snapshot and never waits for the writer.
extension SQLiteStore {
    /// Every collection that holds a record: one pass over `records`.
    public func collectionStatistics() async throws -> [CollectionStatistics] {
        let connection = try await readers.checkout()
        defer { readers.checkin(connection) }
        return try sqlite {
            let statement = try connection.statement(
                """
                SELECT s.collection, s.total - s.hidden, s.hidden, s.bytes, s.last, c.committed_at FROM (
                    SELECT collection, count(*) AS total, sum(hidden) AS hidden, sum(length(body)) AS bytes, max(position) AS last
                    FROM records GROUP BY collection) s
                LEFT JOIN commits c ON c.position = s.last ORDER BY s.collection
                """)
            defer { statement.reset() }
            var statistics: [CollectionStatistics] = []
            while try statement.step() {
                statistics.append(
                    CollectionStatistics(
                        name: try CollectionName(statement.string(0)), visible: Int(statement.int64(1)), hidden: Int(statement.int64(2)),
                        bytes: statement.int64(3), lastPosition: UInt64(clamping: statement.int64(4)),
                        lastChange: statement.isNull(5) ? nil : Date(timeIntervalSince1970: TimeInterval(statement.int64(5)))))
            }
            return statistics
        }
    }

    /// A page of `collection`'s records in id order, hidden ones too, bounded by count and bytes.
    public func recordPage(_ collection: CollectionName, after id: String?, limit: Int, maximumBytes: Int) async throws -> [PagedRecord] {
        let connection = try await readers.checkout()
        defer { readers.checkin(connection) }
        return try sqlite {
            let statement = try connection.statement(
                "SELECT id, hidden, length(body), position, body FROM records WHERE collection = ?1 AND (?2 IS NULL OR id > ?2) ORDER BY id LIMIT ?3")
            defer { statement.reset() }
            try statement.bind([.text(collection.rawValue), id.map { .text($0) } ?? .null, .integer(Int64(max(0, limit)))])
            var page: [PagedRecord] = []
            var bytes = 0
            while try statement.step() {
                // The body's length first: a body past the budget is never read.
                bytes += Int(statement.int64(2))
                if bytes > maximumBytes, !page.isEmpty { break }
                page.append(
                    PagedRecord(
                        record: Record(id: statement.string(0), hidden: statement.int64(1) != 0, canonicalBody: statement.bytes(4)),
                        position: UInt64(clamping: statement.int64(3))))
            }
            return page
        }
    }

    /// The kept versions of one record, newest first: the current one and the superseded ones, in
    /// one statement, bounded by count and bytes.
    public func history(of id: String, in collection: CollectionName, limit: Int, maximumBytes: Int) async throws -> [RecordVersion] {
        let connection = try await readers.checkout()
        defer { readers.checkin(connection) }
        return try sqlite {
            let statement = try connection.statement(
                """
                SELECT v.position, c.committed_at, v.hidden, length(v.body), v.current, v.body FROM (
                    SELECT position, hidden, body, 1 AS current FROM records WHERE collection = ?1 AND id = ?2
                    UNION ALL
                    SELECT position, hidden, body, 0 FROM superseded WHERE collection = ?1 AND id = ?2) v
                LEFT JOIN commits c ON c.position = v.position ORDER BY v.position DESC LIMIT ?3
                """)
            defer { statement.reset() }
            try statement.bind([.text(collection.rawValue), .text(id), .integer(Int64(max(0, limit)))])
            var versions: [RecordVersion] = []
            var bytes = 0
            while try statement.step() {
                bytes += Int(statement.int64(3))
                if bytes > maximumBytes, !versions.isEmpty { break }
                versions.append(
                    RecordVersion(
                        position: UInt64(clamping: statement.int64(0)),
                        time: statement.isNull(1) ? nil : Date(timeIntervalSince1970: TimeInterval(statement.int64(1))), hidden: statement.int64(2) != 0,
                        body: statement.bytes(5), current: statement.int64(4) != 0))
            }
            return versions
        }
    }

    /// The newest logged mutations `query` matches (see `MutationPage`).
    public func recentMutations(_ query: MutationQuery) async throws -> MutationPage {
        let connection = try await readers.checkout()
        defer { readers.checkin(connection) }
        return try sqlite {
            let statement = try connection.statement(
                """
                WITH floor(position) AS (
                    SELECT coalesce((SELECT position FROM mutation_log WHERE position < ?1 ORDER BY position DESC LIMIT 1 OFFSET ?2), 0))
                SELECT m.position, m.logged_at, m.collection, m.id, m.user, m.client, m.mutation, m.operation, floor.position
                FROM mutation_log m, floor
                WHERE m.position < ?1 AND m.position >= floor.position
                  AND (?3 IS NULL OR m.collection = ?3) AND (?4 IS NULL OR m.user = ?4) AND (?5 IS NULL OR m.client = ?5)
                ORDER BY m.position DESC, m.rowid DESC
                """)
            defer { statement.reset() }
            try statement.bind([
                .integer(Int64(clamping: query.before ?? UInt64(Int64.max))), .integer(Int64(MutationPage.rowsExamined)),
                query.collection.map { .text($0.rawValue) } ?? .null, query.user.map { .text($0) } ?? .null, query.client.map { .text($0) } ?? .null,
            ])
            var page = MutationPage.Builder(limit: query.limit)
            while try statement.step() {
                let mutation = LoggedMutation(
                    position: UInt64(clamping: statement.int64(0)), time: statement.int64(1), collection: statement.string(2), id: statement.string(3),
                    user: statement.isNull(4) ? nil : statement.string(4), client: statement.string(5), mutation: UInt64(clamping: statement.int64(6)),
                    operation: statement.string(7))
                page.floor = UInt64(clamping: statement.int64(8))
                guard page.add(mutation) else { break }
            }
            if page.floor == nil {
                page.floor = UInt64(clamping: try connection.integer(Self.mutationFloor, .integer(Int64(clamping: query.before ?? UInt64(Int64.max)))) ?? 0)
            }
            return page.page
        }
    }

    /// Where a scan of `MutationPage.rowsExamined` rows before `?1` ends (0: at the log's start).
    private static let mutationFloor = """
        SELECT coalesce((SELECT position FROM mutation_log WHERE position < ?1 ORDER BY position DESC LIMIT 1 OFFSET \(MutationPage.rowsExamined)), 0)
        """

    /// The records changed last: each collection's newest by `records_by_position`, merged.
    public func recentChanges(in collection: CollectionName?, before: UInt64?, limit: Int) async throws -> [RecentChange] {
        let connection = try await readers.checkout()
        defer { readers.checkin(connection) }
        return try sqlite {
            // One read transaction: the collections and their rows describe one moment.
            try connection.transaction {
                var names: [String] = []
                if let collection {
                    names = [collection.rawValue]
                } else {
                    let list = try connection.statement("SELECT collection FROM digests ORDER BY collection")
                    defer { list.reset() }
                    while try list.step() { names.append(list.string(0)) }
                }
                let statement = try connection.statement(
                    """
                    SELECT r.id, r.hidden, r.position, c.committed_at FROM records r LEFT JOIN commits c ON c.position = r.position
                    WHERE r.collection = ?1 AND r.position < ?2 ORDER BY r.position DESC, r.id DESC LIMIT ?3
                    """)
                var changes: [RecentChange] = []
                for name in names {
                    defer { statement.reset() }
                    try statement.bind([.text(name), .integer(Int64(clamping: before ?? UInt64(Int64.max))), .integer(Int64(max(0, limit)))])
                    let collection = try CollectionName(name)
                    while try statement.step() {
                        changes.append(
                            RecentChange(
                                collection: collection, id: statement.string(0), hidden: statement.int64(1) != 0,
                                position: UInt64(clamping: statement.int64(2)),
                                time: statement.isNull(3) ? nil : Date(timeIntervalSince1970: TimeInterval(statement.int64(3)))))
                    }
                }
                return Array(changes.sorted { ($0.position, $0.collection.rawValue, $0.id) > ($1.position, $1.collection.rawValue, $1.id) }.prefix(limit))
            }
        }
    }

    /// The compaction horizon.
    public func historyHorizon() async throws -> UInt64 {
        let connection = try await readers.checkout()
        defer { readers.checkin(connection) }
        return try sqlite { UInt64(clamping: try connection.integer("SELECT CAST(value AS INTEGER) FROM meta WHERE key = 'horizon'") ?? 0) }
    }
}

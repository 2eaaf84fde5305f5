public import DeltaCore
import DeltaRules
public import DeltaStore
import NIOConcurrencyHelpers
import PostgresNIO

extension PostgresStore {
    /// Opens a REPEATABLE READ transaction for a selection's read: the same verdict as `read`,
    /// then a source over the same snapshot (changed records through a cursor, visible ones by
    /// pages). A delta from before `history_since` is rejected as `expired`.
    public func openSelectionRead(_ collection: CollectionName, since: Since, client: String?) async throws -> (start: SelectionStart, lastMutation: UInt64?) {
        let connection = try await checkoutReader()
        do {
            try await beginRead(connection)
            let opening = try await PostgresReadOpening.read(self, connection, collection, since: since, client: client)
            let last = opening.lastMutation
            switch opening.verdict {
            case .stream(let token, let mode, _):
                if case .delta(let position) = mode, position < opening.historySince {
                    await endRead(connection)
                    return (.answer(.rejected(.expired)), last)
                }
                let source = PostgresSelectionSource(
                    connection: connection, collection: collection, token: token, store: self, mode: mode, changed: opening.changed(for: mode))
                return (.source(source, mode), last)
            case .answer(let result):
                await endRead(connection)
                return (.answer(result), last)
            }
        } catch {
            await release(connection, to: readers, failed: true)
            throw failure(error)
        }
    }

    /// The records changed after $2, each with its version visible at $2 (the newest superseded one at or before it).
    /// Opens the cursor `selection_changed` over the records changed after `since`.
    func declareChanged(_ connection: PostgresConnection, _ collection: CollectionName, since: UInt64) async throws {
        var binds = PostgresBindings(capacity: 2)
        binds.append(collection.rawValue)
        binds.append(Int64(since))
        _ = try await query(connection, Self.changedCursor, binds).collect()
    }

    private static let changedCursor = """
        DECLARE selection_changed NO SCROLL CURSOR FOR
        SELECT r.id, r.hidden, r.body, s.body FROM deltasnap.records r
        LEFT JOIN LATERAL (
            SELECT t.hidden, t.body FROM deltasnap.superseded t
            WHERE t.collection = r.collection AND t.id = r.id AND t.position <= $2 ORDER BY t.position DESC LIMIT 1
        ) s ON NOT s.hidden
        WHERE r.collection = $1 AND r.position > $2
        """
}

/// A selection source over an open REPEATABLE READ transaction; owns its connection until `close()`.
final class PostgresSelectionSource: RuleSource, @unchecked Sendable {
    let token: Token
    let rulesVersion: UInt64
    private let store: PostgresStore
    private let collection: CollectionName
    private let connection: NIOLockedValueBox<PostgresConnection?>

    private let since: UInt64?
    /// The changed records, all of them, when the opening statement read them ahead.
    private let readAhead: [ChangedRecord]?
    /// Where `changed` goes on: an index into `readAhead`, or the cursor's state.
    private let progress = NIOLockedValueBox(Progress())
    /// Whether a transaction holds the read's snapshot; without one (`openRuleChanges`), everything
    /// was read ahead, and a statement would see another snapshot (`inSnapshot`).
    private let transaction: Bool

    private struct Progress {
        var next = 0
        var declared = false
        var exhausted = false
    }

    /// A source over `connection`'s open transaction (or, without a `transaction`, over what its
    /// opening statement read); `changed`, when given, is every record changed after the delta's
    /// position (read ahead), so no cursor is needed.
    init(
        connection: PostgresConnection, collection: CollectionName, token: Token, store: PostgresStore, mode: FeedMode, changed: [ChangedRecord]? = nil,
        rulesVersion: UInt64 = 0, transaction: Bool = true
    ) {
        self.transaction = transaction
        self.connection = NIOLockedValueBox(connection)
        self.rulesVersion = rulesVersion
        self.collection = collection
        self.token = token
        self.store = store
        if case .delta(let position) = mode { since = position } else { since = nil }
        readAhead = since == nil ? nil : changed
    }

    /// Refuses a statement outside the read's snapshot: a caller of `openRuleChanges` asked for
    /// more than a delta's changed records.
    private func inSnapshot(_ what: String) throws {
        guard !transaction else { return }
        throw StoreError(
            .corrupt, "read of \(collection)", "\(what) was asked of a read of changes alone (openRuleChanges), which has no transaction",
            evidence: "token \(token)")
    }

    func forEachBody(of collection: CollectionName, at position: UInt64?, key: RowsKey?, _ visit: (UnsafeRawBufferPointer) throws -> Void) async throws {
        try inSnapshot("a $rows source")
        guard let connection = connection.withLockedValue({ $0 }) else { return }
        try await store.forEachBody(connection, of: collection, at: position, key: key, visit)
    }

    func newestToken(of collections: [CollectionName]) async throws -> Token {
        try inSnapshot("the newest token")
        guard let connection = connection.withLockedValue({ $0 }) else { return Token(database: store.databaseID, position: 0, commit: 0) }
        var binds = PostgresBindings(capacity: 1)
        binds.append(collections.map(\.rawValue))
        let sql = """
            WITH n AS (SELECT coalesce(max(position), 0) AS p FROM deltasnap.records WHERE collection = ANY($1))
            SELECT n.p, coalesce(c.tag, 0) FROM n LEFT JOIN deltasnap.commits c ON c.position = n.p
            """
        var (position, tag): (Int64, Int64) = (0, 0)
        do {
            for try await row in try await store.query(connection, sql, binds) { (position, tag) = try row.decode((Int64, Int64).self) }
        } catch {
            throw store.failure(error)
        }
        return Token(database: store.databaseID, position: UInt64(clamping: position), commit: UInt32(truncatingIfNeeded: tag))
    }

    func rewindChanged() async throws {
        let declared = progress.withLockedValue { progress in
            defer { progress = Progress() }
            return progress.declared
        }
        guard declared, let connection = connection.withLockedValue({ $0 }) else { return }
        do {
            _ = try await store.query(connection, "CLOSE selection_changed").collect()
        } catch {
            throw store.failure(error)
        }
    }

    func visible(downFrom from: String, inclusive: Bool, maximum: Int) async throws -> [StoredBody] {
        var binds = PostgresBindings(capacity: 3)
        binds.append(collection.rawValue)
        binds.append(from)
        binds.append(Int64(maximum))
        return try await bodies(
            "SELECT id, body FROM deltasnap.records WHERE collection = $1 AND NOT hidden AND id \(inclusive ? "<=" : "<") $2 ORDER BY id DESC LIMIT $3", binds)
    }

    func changed(maximum: Int) async throws -> [ChangedRecord]? {
        let count = max(1, maximum)
        if let readAhead {
            let slice: ArraySlice<ChangedRecord> = progress.withLockedValue { progress in
                let end = min(readAhead.count, progress.next + count)
                defer { progress.next = end }
                return readAhead[progress.next..<end]
            }
            return slice.isEmpty ? nil : Array(slice)
        }
        let (declared, exhausted) = progress.withLockedValue { ($0.declared, $0.exhausted) }
        guard let since, !exhausted, let connection = connection.withLockedValue({ $0 }) else { return nil }
        try inSnapshot("a cursor over the changed records")
        var rows: [ChangedRecord] = []
        do {
            if !declared {
                try await store.declareChanged(connection, collection, since: since)
                progress.withLockedValue { $0.declared = true }
            }
            for try await row in try await store.query(connection, "FETCH \(count) FROM selection_changed") {
                let (id, hidden, body, before) = try row.decode((String, Bool, ByteBuffer, ByteBuffer?).self)
                rows.append(ChangedRecord(id: id, hidden: hidden, body: Array(buffer: body), before: before.map { Array(buffer: $0) }))
            }
        } catch {
            throw store.failure(error)
        }
        // A short page is the last: no round trip to learn that the next one is empty.
        if rows.count < count { progress.withLockedValue { $0.exhausted = true } }
        return rows.isEmpty ? nil : rows
    }

    func visible(after: String?, through: String?, unchangedSince: UInt64?, maximum: Int) async throws -> [StoredBody] {
        var binds = PostgresBindings(capacity: 5)
        binds.append(collection.rawValue)
        binds.append(Int64(maximum))
        var sql = "SELECT id, body FROM deltasnap.records WHERE collection = $1 AND NOT hidden"
        if let after {
            binds.append(after)
            sql += " AND id > $\(binds.count)"
        }
        if let through {
            binds.append(through)
            sql += " AND id <= $\(binds.count)"
        }
        if let unchangedSince {
            binds.append(Int64(unchangedSince))
            sql += " AND position <= $\(binds.count)"
        }
        return try await bodies(sql + " ORDER BY id LIMIT $2", binds)
    }

    /// The rows (id, body) of `sql`, in the open transaction.
    private func bodies(_ sql: String, _ binds: PostgresBindings) async throws -> [StoredBody] {
        try inSnapshot("a page of visible records")
        guard let connection = connection.withLockedValue({ $0 }) else { return [] }
        var rows: [StoredBody] = []
        do {
            for try await row in try await store.query(connection, sql, binds) {
                let (id, body) = try row.decode((String, ByteBuffer).self)
                rows.append(StoredBody(id: id, body: Array(buffer: body)))
            }
        } catch {
            throw store.failure(error)
        }
        return rows
    }

    func close() {
        guard
            let open = connection.withLockedValue({ value -> PostgresConnection? in
                defer { value = nil }
                return value
            })
        else { return }
        store.endReadInBackground(open, transaction: transaction)
    }
}

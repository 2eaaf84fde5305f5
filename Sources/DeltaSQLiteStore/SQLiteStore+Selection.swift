public import DeltaCore
import DeltaRules
import DeltaSQLite
public import DeltaStore

extension SQLiteStore {
    /// Opens one read transaction for a selection's read: the same verdict as `read`, then a
    /// source over that transaction. A delta from before `history_since` (the position at which
    /// this database began keeping superseded versions) is rejected as `expired`: without those
    /// versions no exact selection delta can be computed.
    public func openSelectionRead(_ collection: CollectionName, since: Since, client: String?) async throws -> (start: SelectionStart, lastMutation: UInt64?) {
        let connection = try await readers.checkout()
        do {
            let (verdict, last, historySince) = try sqlite { () throws -> (ReadVerdict, UInt64?, UInt64) in
                try connection.statement("BEGIN").step()
                let verdict = try evaluate(connection, collection, since, wholeCollection: false)
                let historySince = UInt64(clamping: try connection.integer("SELECT CAST(value AS INTEGER) FROM meta WHERE key = 'history_since'") ?? 0)
                return (verdict, try lastMutation(connection, client), historySince)
            }
            switch verdict {
            case .stream(let token, let mode, _):
                if case .delta(let position) = mode, position < historySince {
                    endRead(connection)
                    return (.answer(.rejected(.expired)), last)
                }
                return (.source(SQLiteSelectionSource(connection: connection, collection: collection, token: token, mode: mode, store: self), mode), last)
            case .answer(let result):
                endRead(connection)
                return (.answer(result), last)
            }
        } catch {
            readers.checkin(connection)
            throw error
        }
    }
}

/// A selection source over an open SQLite read transaction; owns its connection until `close()`.
final class SQLiteSelectionSource: RuleSource, @unchecked Sendable {
    let token: Token
    let rulesVersion: UInt64
    private let state: Locked<Connection?>
    private let collection: CollectionName
    private let since: UInt64
    private let store: SQLiteStore
    private var started = false
    private var exhausted = false

    /// The records changed after ?2, each with its version visible at ?2 (the newest superseded one
    /// at or before it, NULL when that one is hidden): one seek into `superseded` per record (a join
    /// on the newest position took two, and was 25% slower on a user's 100-record delta).
    private static let changedSQL = """
        SELECT r.id, r.hidden, r.body, (
            SELECT CASE WHEN s.hidden THEN NULL ELSE s.body END FROM superseded s
            WHERE s.collection = r.collection AND s.id = r.id AND s.position <= ?2 ORDER BY s.position DESC LIMIT 1)
        FROM records r WHERE r.collection = ?1 AND r.position > ?2
        """

    init(connection: Connection, collection: CollectionName, token: Token, mode: FeedMode, store: SQLiteStore, rulesVersion: UInt64 = 0) {
        self.state = Locked(connection)
        self.rulesVersion = rulesVersion
        self.collection = collection
        self.token = token
        if case .delta(let position) = mode { since = position } else { since = 0 }
        self.store = store
    }

    deinit { close() }

    func changed(maximum: Int) async throws -> [ChangedRecord]? {
        try state.withLock { connection -> [ChangedRecord]? in
            guard let connection, !exhausted else { return nil }
            let statement = try store.sqlite { try connection.statement(Self.changedSQL, keepingPosition: started) }
            if !started {
                try store.sqlite { try statement.bind([.text(collection.rawValue), .integer(Int64(since))]) }
                started = true
            }
            var rows: [ChangedRecord] = []
            while rows.count < maximum {
                guard try store.sqlite({ try statement.step() }) else {
                    exhausted = true
                    break
                }
                rows.append(
                    ChangedRecord(
                        id: statement.string(0), hidden: statement.int64(1) != 0, body: statement.bytes(2),
                        before: statement.isNull(3) ? nil : statement.bytes(3)))
            }
            return rows.isEmpty ? nil : rows
        }
    }

    func visible(after: String?, through: String?, unchangedSince: UInt64?, maximum: Int) async throws -> [StoredBody] {
        try state.withLock { connection -> [StoredBody] in
            guard let connection else { return [] }
            var sql = "SELECT id, body FROM records WHERE collection = ?1 AND hidden = 0"
            var bindings: [SQLValue] = [.text(collection.rawValue), .integer(Int64(maximum))]
            if let after {
                bindings.append(.text(after))
                sql += " AND id > ?\(bindings.count)"
            }
            if let through {
                bindings.append(.text(through))
                sql += " AND id <= ?\(bindings.count)"
            }
            if let unchangedSince {
                bindings.append(.integer(Int64(unchangedSince)))
                sql += " AND position <= ?\(bindings.count)"
            }
            sql += " ORDER BY id LIMIT ?2"
            return try store.sqlite {
                let statement = try connection.statement(sql)
                defer { statement.reset() }
                try statement.bind(bindings)
                var rows: [StoredBody] = []
                while try statement.step() { rows.append(StoredBody(id: statement.string(0), body: statement.bytes(1))) }
                return rows
            }
        }
    }

    func visible(downFrom from: String, inclusive: Bool, maximum: Int) async throws -> [StoredBody] {
        try state.withLock { connection -> [StoredBody] in
            guard let connection else { return [] }
            return try store.sqlite {
                let statement = try connection.statement(
                    "SELECT id, body FROM records WHERE collection = ?1 AND hidden = 0 AND id \(inclusive ? "<=" : "<") ?2 ORDER BY id DESC LIMIT ?3")
                defer { statement.reset() }
                try statement.bind([.text(collection.rawValue), .text(from), .integer(Int64(maximum))])
                var rows: [StoredBody] = []
                while try statement.step() { rows.append(StoredBody(id: statement.string(0), body: statement.bytes(1))) }
                return rows
            }
        }
    }

    func forEachBody(of collection: CollectionName, at position: UInt64?, key: RowsKey?, _ visit: (UnsafeRawBufferPointer) throws -> Void) async throws {
        try state.withLock { connection in
            guard let connection else { return }
            try store.sqlite { try store.forEachBody(connection, of: collection, at: position, key: key, visit) }
        }
    }

    func newestToken(of collections: [CollectionName]) async throws -> Token {
        try state.withLock { connection -> Token in
            guard let connection, !collections.isEmpty else { return Token(database: store.databaseID, position: 0, commit: 0) }
            let marks = Array(repeating: "?", count: collections.count).joined(separator: ", ")
            return try store.sqlite {
                let statement = try connection.statement("SELECT coalesce(max(position), 0) FROM records WHERE collection IN (\(marks))")
                defer { statement.reset() }
                try statement.bind(collections.map { .text($0.rawValue) })
                _ = try statement.step()
                return try store.token(connection, at: UInt64(clamping: statement.int64(0)))
            }
        }
    }

    func rewindChanged() async throws {
        try state.withLock { connection in
            guard let connection else { return }
            try store.sqlite { try connection.statement(Self.changedSQL, keepingPosition: true).reset() }
            started = false
            exhausted = false
        }
    }

    func close() {
        guard
            let connection = state.withLock({ value -> Connection? in
                defer { value = nil }
                return value
            })
        else { return }
        store.endRead(connection)
    }
}

public import DeltaCore
import DeltaSQLite
import Foundation

extension SQLiteStore {
    /// Runs `body` inside `BEGIN IMMEDIATE` on the one writer connection; commits one position if anything changed.
    public func write<T: Sendable>(
        to collection: CollectionName, _ body: (any WriteTransaction) async throws -> T
    ) async throws -> (value: T, commit: CommitResult) {
        let connection = try await writer.checkout()
        defer { writer.checkin(connection) }
        let transaction = SQLiteWriteTransaction(connection: connection, collection: collection, store: self)
        try sqlite {
            try connection.execute("BEGIN IMMEDIATE")
            try connection.execute("CREATE TEMP TABLE IF NOT EXISTS written(id TEXT PRIMARY KEY) WITHOUT ROWID; DELETE FROM temp.written")
        }
        do {
            let value = try await body(transaction)
            let result = try sqlite { try transaction.finish() }
            connection.resetStatements()
            try sqlite { try connection.execute("COMMIT") }
            return (value, result)
        } catch {
            try? connection.execute("ROLLBACK")
            throw error
        }
    }
}

/// The writes of one SQLite transaction; used by one task, then finished.
final class SQLiteWriteTransaction: WriteTransaction, @unchecked Sendable {
    private let connection: Connection
    private let collection: CollectionName
    private let store: SQLiteStore
    private var position: UInt64?
    private var upserted = 0
    private var hidden = 0
    private var unchanged = 0
    private var finished = false
    /// Hashes every change of this commit, in order: the commit's tag chains from its predecessor's through it.
    private var changes = SHA256()

    init(connection: Connection, collection: CollectionName, store: SQLiteStore) {
        self.connection = connection
        self.collection = collection
        self.store = store
    }

    func upsert(_ record: Record) async throws -> Bool {
        try store.sqlite {
            try claim(record.id)
            let existing = try connection.statement("SELECT hidden, body FROM records WHERE collection = ? AND id = ?")
            try existing.bind([.text(collection.rawValue), .text(record.id)])
            if try existing.step() {
                let same = (existing.int64(0) != 0) == record.hidden && existing.withBytes(1) { $0.elementsEqual(record.body) }
                existing.reset()
                if same {
                    unchanged += 1
                    return false
                }
            }
            let insert = try connection.statement(
                """
                INSERT INTO records(collection, id, position, hidden, body) VALUES (?, ?, ?, ?, ?)
                ON CONFLICT(collection, id) DO UPDATE
                SET position = excluded.position, hidden = excluded.hidden, body = excluded.body
                """)
            try insert.bind([
                .text(collection.rawValue), .text(record.id), .integer(Int64(try nextPosition())),
                .integer(record.hidden ? 1 : 0), .blob(record.body),
            ])
            try insert.step()
            hash(id: record.id, hidden: record.hidden, body: record.body)
            if record.hidden { hidden += 1 } else { upserted += 1 }
            return true
        }
    }

    func hide(id: String) async throws -> Bool {
        try store.sqlite {
            try claim(id)
            guard let wasHidden = try connection.integer("SELECT hidden FROM records WHERE collection = ? AND id = ?", .text(collection.rawValue), .text(id)) else {
                throw StoreError(.notFound, "record \(String(reflecting: id)) in \(collection)", "does not exist")
            }
            if wasHidden != 0 {
                unchanged += 1
                return false
            }
            try connection.statement("UPDATE records SET hidden = 1, position = ? WHERE collection = ? AND id = ?")
                .run(.integer(Int64(try nextPosition())), .text(collection.rawValue), .text(id))
            hash(id: id, hidden: true, body: [])
            hidden += 1
            return true
        }
    }

    func hideUnwritten() async throws -> Int {
        try store.sqlite {
            precondition(!finished, "WriteTransaction used after its commit")
            try connection.execute("CREATE TEMP TABLE IF NOT EXISTS unwritten(id TEXT PRIMARY KEY) WITHOUT ROWID; DELETE FROM temp.unwritten")
            try connection.statement(
                """
                INSERT INTO temp.unwritten(id) SELECT id FROM records
                WHERE collection = ? AND hidden = 0 AND id NOT IN (SELECT id FROM temp.written)
                """
            ).run(.text(collection.rawValue))
            let gone = try connection.statement("SELECT id FROM temp.unwritten ORDER BY id")
            defer { gone.reset() }
            let update = try connection.statement("UPDATE records SET hidden = 1, position = ? WHERE collection = ? AND id = ?")
            var count = 0
            while try gone.step() {
                let id = gone.string(0)
                try update.run(.integer(Int64(try nextPosition())), .text(collection.rawValue), .text(id))
                hash(id: id, hidden: true, body: [])
                count += 1
            }
            hidden += count
            return count
        }
    }

    private func hash(id: String, hidden: Bool, body: [UInt8]) {
        changes.update(Array(collection.rawValue.utf8) + [0] + Array(id.utf8) + [0, hidden ? 1 : 0, 0])
        changes.update(body)
        changes.update([0x0A])
    }

    /// Refuses a second write to the same id in one commit: which one should win would be a guess.
    private func claim(_ id: String) throws {
        precondition(!finished, "WriteTransaction used after its commit")
        do {
            try connection.statement("INSERT INTO temp.written(id) VALUES (?)").run(.text(id))
        } catch let error as SQLiteError where error.isConstraint {
            throw StoreError(.invalidWrite, "record \(String(reflecting: id)) in \(collection)", "written twice in one commit")
        }
    }

    /// The position of this commit, taken on the first change.
    private func nextPosition() throws -> UInt64 {
        if let position { return position }
        let head = UInt64(clamping: try connection.integer("SELECT coalesce(max(position), 0) FROM commits") ?? 0)
        let next = head + 1
        // Last-Modified shows the position as a date: it must never be in the future.
        let now = UInt64(Date().timeIntervalSince1970)
        guard next <= now else {
            throw StoreError(.invalidWrite, "commit", "the commit counter would pass the current time", evidence: "position \(next), clock \(now)")
        }
        position = next
        return next
    }

    /// The commit's tag: the first 32 bits of SHA-256(previous tag, position, SHA-256 of the changes), never 0.
    ///
    /// A chain, not a random number: a database restored from a backup that then takes different
    /// writes gets different tags from the history it lost (its tokens are refused), while the same
    /// writes replayed on the same identity give the same tags, and the same snapshot bytes.
    static func tag(previous: UInt32, position: UInt64, changes: [UInt8]) -> UInt32 {
        var input: [UInt8] = []
        for shift in stride(from: 24, through: 0, by: -8) { input.append(UInt8(truncatingIfNeeded: previous >> UInt32(shift))) }
        for shift in stride(from: 56, through: 0, by: -8) { input.append(UInt8(truncatingIfNeeded: position >> UInt64(shift))) }
        let digest = SHA256.hash(input + changes)
        let tag = UInt32(digest[0]) << 24 | UInt32(digest[1]) << 16 | UInt32(digest[2]) << 8 | UInt32(digest[3])
        return tag == 0 ? 1 : tag
    }

    /// Records the commit (when anything changed) and returns the result.
    func finish() throws -> CommitResult {
        finished = true
        let token: Token
        if let position {
            let previous = try store.commitTag(connection, at: position - 1) ?? 0
            let tag = SQLiteWriteTransaction.tag(previous: previous, position: position, changes: changes.finalize())
            try connection.statement("INSERT INTO commits(position, tag, committed_at) VALUES (?, ?, ?)")
                .run(.integer(Int64(position)), .integer(Int64(tag)), .integer(Int64(Date().timeIntervalSince1970)))
            token = Token(database: store.databaseID, position: position, commit: tag)
        } else if let head = try connection.integer("SELECT max(position) FROM records WHERE collection = ?", .text(collection.rawValue)) {
            token = try store.token(connection, at: UInt64(clamping: head))
        } else {
            token = Token(database: store.databaseID, position: 0, commit: 0)
        }
        return CommitResult(token: token, committed: position != nil, upserted: upserted, hidden: hidden, unchanged: unchanged)
    }
}

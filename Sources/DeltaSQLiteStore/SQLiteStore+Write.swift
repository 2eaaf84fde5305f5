public import DeltaCore
import DeltaSQLite
public import DeltaStore
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
    let connection: Connection
    let collection: CollectionName
    let store: SQLiteStore
    private var position: UInt64?
    private var upserted = 0
    private var hidden = 0
    private var unchanged = 0
    private var finished = false
    /// Every change of this commit, in order: the commit's tag chains from its predecessor's through it.
    private var chain = CommitChain()
    /// What this commit does to the collection's state digest and visible count: new visible versions in, old ones out.
    private var stateChange = StateChange()

    init(connection: Connection, collection: CollectionName, store: SQLiteStore) {
        self.connection = connection
        self.collection = collection
        self.store = store
    }

    func upsert(_ record: Record) async throws {
        try store.sqlite {
            try claim(record.id)
            let existing = try connection.statement("SELECT hidden, body FROM records WHERE collection = ? AND id = ?")
            try existing.bind([.text(collection.rawValue), .text(record.id)])
            if try existing.step() {
                let wasHidden = existing.int64(0) != 0
                let same = wasHidden == record.hidden && existing.withBytes(1) { $0.elementsEqual(record.body) }
                if !same && !wasHidden { existing.withBytes(1) { stateChange.remove(body: $0) } }
                existing.reset()
                if same {
                    unchanged += 1
                    return
                }
            }
            try write(record, replacing: nil)
        }
    }

    /// Inserts or replaces `record` at this commit's position, known to differ from what is
    /// stored; a visible version it replaces that the caller read itself comes as `replacing`
    /// (the upsert above has already taken its own out of the digest).
    func write(_ record: Record, replacing: Record?) throws {
        if let replacing, !replacing.hidden { stateChange.remove(body: replacing.body) }
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
        try keepBlobReferences(record)
        hash(id: record.id, hidden: record.hidden, body: record.body)
        if !record.hidden { stateChange.add(body: record.body) }
        if record.hidden { hidden += 1 } else { upserted += 1 }
    }

    func hide(id: String) async throws -> Bool {
        try store.sqlite {
            try claim(id)
            let existing = try connection.statement("SELECT hidden, body FROM records WHERE collection = ? AND id = ?")
            try existing.bind([.text(collection.rawValue), .text(id)])
            guard try existing.step() else {
                throw StoreError(.notFound, "record \(String(reflecting: id)) in \(collection)", "does not exist")
            }
            let wasHidden = existing.int64(0) != 0
            if !wasHidden { existing.withBytes(1) { stateChange.remove(body: $0) } }
            existing.reset()
            if wasHidden {
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
            try connection.execute(
                "CREATE TEMP TABLE IF NOT EXISTS unwritten(id TEXT PRIMARY KEY, body BLOB NOT NULL) WITHOUT ROWID; DELETE FROM temp.unwritten")
            try connection.statement(
                """
                INSERT INTO temp.unwritten(id, body) SELECT id, body FROM records
                WHERE collection = ? AND hidden = 0 AND id NOT IN (SELECT id FROM temp.written)
                """
            ).run(.text(collection.rawValue))
            let gone = try connection.statement("SELECT id, body FROM temp.unwritten ORDER BY id")
            defer { gone.reset() }
            let update = try connection.statement("UPDATE records SET hidden = 1, position = ? WHERE collection = ? AND id = ?")
            var count = 0
            while try gone.step() {
                let id = gone.string(0)
                gone.withBytes(1) { stateChange.remove(body: $0) }
                try update.run(.integer(Int64(try nextPosition())), .text(collection.rawValue), .text(id))
                hash(id: id, hidden: true, body: [])
                count += 1
            }
            hidden += count
            return count
        }
    }

    func heldBlobs(_ hashes: [BlobHash], uploadedBy user: String?) async throws -> Set<BlobHash> {
        try store.sqlite {
            let select = try connection.statement(
                "SELECT 1 FROM blobs b WHERE b.hash = ?1 AND (?2 IS NULL OR EXISTS (SELECT 1 FROM blob_uploaders u WHERE u.hash = ?1 AND u.user = ?2))")
            var held = Set<BlobHash>()
            for hash in hashes {
                try select.bind([.text(hash.hex), user.map { .text($0) } ?? .null])
                if try select.step() { held.insert(hash) }
                select.reset()
            }
            return held
        }
    }

    /// Keeps which blobs `record` references (the triggers dropped its previous version's).
    private func keepBlobReferences(_ record: Record) throws {
        guard record.body.containsBlobMarker, let references = try? record.blobReferences(), !references.isEmpty else { return }
        let insert = try connection.statement("INSERT OR IGNORE INTO blob_refs(hash, collection, id) VALUES (?, ?, ?)")
        for reference in references {
            try insert.run(.text(reference.hash.hex), .text(collection.rawValue), .text(record.id))
        }
    }

    private func hash(id: String, hidden: Bool, body: [UInt8]) {
        chain.add(collection: collection, id: id, hidden: hidden, body: body)
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
    func nextPosition() throws -> UInt64 {
        if let position { return position }
        let head = UInt64(clamping: try connection.integer("SELECT coalesce(max(position), 0) FROM commits") ?? 0)
        let next = try CommitChain.nextPosition(after: head)
        position = next
        return next
    }

    /// Records the commit (when anything changed) and returns the result.
    func finish() throws -> CommitResult {
        finished = true
        let token: Token
        if let position {
            let previous = try store.commitTag(connection, at: position - 1) ?? 0
            let tag = chain.tag(previous: previous, position: position)
            try connection.statement("INSERT INTO commits(position, tag, committed_at) VALUES (?, ?, ?)")
                .run(.integer(Int64(position)), .integer(Int64(tag)), .integer(Int64(Date().timeIntervalSince1970)))
            try store.addDigest(connection, collection, stateChange)
            token = Token(database: store.databaseID, position: position, commit: tag)
        } else if let head = try connection.integer("SELECT max(position) FROM records WHERE collection = ?", .text(collection.rawValue)) {
            token = try store.token(connection, at: UInt64(clamping: head))
        } else {
            token = Token(database: store.databaseID, position: 0, commit: 0)
        }
        return CommitResult(token: token, committed: position != nil, upserted: upserted, hidden: hidden, unchanged: unchanged)
    }
}

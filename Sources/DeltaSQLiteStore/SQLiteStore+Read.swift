public import DeltaCore
import DeltaSQLite
public import DeltaStore

extension SQLiteStore {
    /// Opens one read transaction, checks `since` against it, and either answers or starts a feed;
    /// a `client`'s last mutation id is read in the same transaction.
    public func read(_ collection: CollectionName, since: Since, client: String?) async throws -> (result: ReadResult, lastMutation: UInt64?) {
        let connection = try await readers.checkout()
        do {
            let (verdict, last) = try sqlite { () throws -> (ReadVerdict, UInt64?) in
                try connection.statement("BEGIN").step()
                let verdict = try evaluate(connection, collection, since)
                return (verdict, try lastMutation(connection, client))
            }
            switch verdict {
            case .answer(let result):
                try sqlite { try connection.statement("COMMIT").step() }
                readers.checkin(connection)
                return (result, last)
            case .stream(let token, let mode, let digest):
                let feed = SQLiteChangeFeed(connection: connection, collection: collection, token: token, mode: mode, digest: digest, store: self)
                return (.changes(feed), last)
            }
        } catch {
            readers.checkin(connection)
            throw error
        }
    }

    /// The verdict alone, in one read transaction (the changed records are not counted).
    public func verdict(_ collection: CollectionName, since: Since, client: String?) async throws -> (verdict: ReadVerdict, lastMutation: UInt64?) {
        let connection = try await readers.checkout()
        defer { readers.checkin(connection) }
        return try sqlite { () throws -> (ReadVerdict, UInt64?) in
            _ = try connection.statement("BEGIN").step()
            defer { _ = try? connection.statement("COMMIT").step() }
            return (try evaluate(connection, collection, since, wholeCollection: false), try lastMutation(connection, client))
        }
    }

    /// `client`'s last mutation id (0 before its first push), read in the open transaction; nil without a client.
    func lastMutation(_ connection: Connection, _ client: String?) throws -> UInt64? {
        guard let client else { return nil }
        return UInt64(clamping: try connection.integer("SELECT last_mutation FROM push_clients WHERE client = ?", .text(client)) ?? 0)
    }

    /// One statement reads everything a verdict needs: the database head, the horizon, the
    /// collection's newest position and its commit tag, the tag at the position asked about, and
    /// the collection's state digest.
    private static let verdictQuery = """
        SELECT (SELECT coalesce(max(position), 0) FROM commits),
               (SELECT CAST(value AS INTEGER) FROM meta WHERE key = 'horizon'),
               (SELECT max(position) FROM records WHERE collection = ?1),
               (SELECT tag FROM commits WHERE position = (SELECT max(position) FROM records WHERE collection = ?1)),
               (SELECT tag FROM commits WHERE position = ?2),
               (SELECT digest FROM digests WHERE collection = ?1),
               (SELECT records FROM digests WHERE collection = ?1),
               CASE WHEN ?3 THEN (SELECT count(*) FROM records WHERE collection = ?1 AND position > ?2) END
        """

    /// Checks `since` against the open read transaction on `connection`; a read of a selection
    /// (`wholeCollection` false) does not count the changed records, so it is never switched to a full answer.
    /// With `absentIsEmpty`, a collection without records is read as empty (`ReadVerdict.decide`).
    func evaluate(_ connection: Connection, _ collection: CollectionName, _ since: Since, wholeCollection: Bool = true, absentIsEmpty: Bool = false) throws
        -> ReadVerdict
    {
        let query = try connection.statement(Self.verdictQuery)
        defer { query.reset() }
        let asked = ReadVerdict.askedPosition(since)
        try query.bind([.text(collection.rawValue), .integer(Int64(clamping: asked)), .integer(wholeCollection && asked > 0 ? 1 : 0)])
        try query.step()
        func tag(_ column: Int32) -> UInt32? { query.isNull(column) ? nil : UInt32(truncatingIfNeeded: query.int64(column)) }
        guard let digest = query.isNull(5) ? .empty : query.withBytes(5, { StateDigest(bytes: $0) }) else {
            throw StoreError(.corrupt, "digest of \(collection)", "is not 32 bytes", evidence: "store \(path)")
        }
        let facts = ReadVerdict.Facts(
            head: UInt64(clamping: query.int64(0)), horizon: query.isNull(1) ? 0 : UInt64(clamping: query.int64(1)),
            collectionHead: query.isNull(2) ? nil : UInt64(clamping: query.int64(2)), collectionTag: tag(3), askedTag: tag(4), digest: digest,
            visible: Int(query.int64(6)), changed: query.isNull(7) ? nil : Int(query.int64(7)))
        return try ReadVerdict.decide(collection, since: since, database: databaseID, facts: facts, store: path, absentIsEmpty: absentIsEmpty)
    }

    /// The tag of the commit at `position` (0 for position 0), or nil when there is none.
    func commitTag(_ connection: Connection, at position: UInt64) throws -> UInt32? {
        if position == 0 { return 0 }
        return try connection.integer("SELECT tag FROM commits WHERE position = ?", .integer(Int64(position))).map { UInt32(truncatingIfNeeded: $0) }
    }

    /// The token for `position`, with its commit tag.
    func token(_ connection: Connection, at position: UInt64) throws -> Token {
        guard position <= Token.maximumPosition, let tag = try commitTag(connection, at: position) else {
            throw StoreError(.corrupt, "store \(path)", "a record names a commit that does not exist", evidence: "position \(position)")
        }
        return Token(database: databaseID, position: position, commit: tag)
    }
}

extension SQLiteStore {
    /// Steps `statement` (columns: hidden, body) into a batch of about `maximumBytes`, nil when it has no more rows.
    /// Sets `exhausted` at the first SQLITE_DONE: stepping a finished statement would start it over.
    func fillBatch(_ statement: Statement, maximumBytes: Int, exhausted: inout Bool) throws -> RecordBatch? {
        var batch = RecordBatch(capacity: maximumBytes + 4096)
        while batch.bytes.count < maximumBytes {
            guard try sqlite({ try statement.step() }) else {
                exhausted = true
                break
            }
            let hidden = statement.int64(0) != 0
            statement.withBytes(1) { batch.append(body: $0, hidden: hidden) }
        }
        return batch.isEmpty ? nil : batch
    }

    /// Ends the read transaction on `connection`, statements in progress included, and returns it to the pool.
    func endRead(_ connection: Connection) {
        connection.resetStatements()
        _ = try? connection.statement("COMMIT").step()
        readers.checkin(connection)
    }
}

/// A feed over an open SQLite read transaction; owns its connection until `close()`.
final class SQLiteChangeFeed: ChangeFeed, @unchecked Sendable {
    let token: Token
    let mode: FeedMode
    let digest: StateDigest
    private let state: Locked<Connection?>
    private let collection: CollectionName
    private let store: SQLiteStore
    private var started = false
    private var exhausted = false

    init(connection: Connection, collection: CollectionName, token: Token, mode: FeedMode, digest: StateDigest, store: SQLiteStore) {
        self.state = Locked(connection)
        self.digest = digest
        self.collection = collection
        self.token = token
        self.mode = mode
        self.store = store
    }

    deinit { close() }

    func next(maximumBytes: Int) async throws -> RecordBatch? {
        try state.withLock { connection -> RecordBatch? in
            guard let connection, !exhausted else { return nil }
            let statement: Statement
            switch mode {
            case .full:
                statement = try openOrContinue(
                    connection, "SELECT hidden, body FROM records WHERE collection = ?1 AND hidden = 0 ORDER BY id", [.text(collection.rawValue)])
            case .delta(let since):
                statement = try openOrContinue(
                    connection, "SELECT hidden, body FROM records WHERE collection = ?1 AND position > ?2 ORDER BY position, id",
                    [.text(collection.rawValue), .integer(Int64(since))])
            }
            return try store.fillBatch(statement, maximumBytes: maximumBytes, exhausted: &exhausted)
        }
    }

    /// The statement for this feed: bound and started on the first call, continued after.
    private func openOrContinue(_ connection: Connection, _ sql: String, _ bindings: [SQLValue]) throws -> Statement {
        let statement = try store.sqlite { try connection.statement(sql, keepingPosition: started) }
        if !started {
            try store.sqlite { try statement.bind(bindings) }
            started = true
        }
        return statement
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

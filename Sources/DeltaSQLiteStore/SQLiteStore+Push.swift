public import DeltaCore
import DeltaRules
import DeltaSQLite
public import DeltaStore
import Foundation

extension SQLiteStore {
    /// The record `id` of `collection`, hidden ones too, from one read transaction.
    public func record(_ id: String, in collection: CollectionName) async throws -> StoredRecord? {
        let connection = try await readers.checkout()
        defer { readers.checkin(connection) }
        return try sqlite {
            try connection.transaction(.deferred) { try stored(connection, collection, id) }
        }
    }

    /// Reads the record with its commit's token and the client that pushed this version.
    func stored(_ connection: Connection, _ collection: CollectionName, _ id: String) throws -> StoredRecord? {
        let query = try connection.statement(
            """
            SELECT r.hidden, r.body, r.position, c.tag, w.client FROM records r
            LEFT JOIN commits c ON c.position = r.position
            LEFT JOIN push_writers w ON w.collection = r.collection AND w.id = r.id AND w.position = r.position
            WHERE r.collection = ? AND r.id = ?
            """)
        defer { query.reset() }
        try query.bind([.text(collection.rawValue), .text(id)])
        guard try query.step() else { return nil }
        guard !query.isNull(3) else {
            throw StoreError(.corrupt, "store \(path)", "a record names a commit that does not exist", evidence: "position \(query.int64(2))")
        }
        let record = Record(id: id, hidden: query.int64(0) != 0, canonicalBody: query.bytes(1))
        let token = Token(database: databaseID, position: UInt64(clamping: query.int64(2)), commit: UInt32(truncatingIfNeeded: query.int64(3)))
        return StoredRecord(record: record, token: token, writer: query.isNull(4) ? nil : query.string(4))
    }

    /// The principal `client` belongs to: one statement, so one snapshot.
    public func owner(ofClient client: String) async throws -> String? {
        let connection = try await readers.checkout()
        defer { readers.checkin(connection) }
        return try sqlite { try connection.text(Self.ownerQuery, .text(client)) }
    }

    /// The principal of client `?1`: the one recorded, else a user recorded before principals were (by bare `sub`).
    static let ownerQuery = """
        SELECT coalesce((SELECT principal FROM client_principals WHERE client = ?1), (SELECT 'user:' || user FROM client_owners WHERE client = ?1))
        """
}

extension SQLiteWriteTransaction: PushLedger {
    func stored(_ id: String) async throws -> StoredRecord? {
        try store.sqlite { try store.stored(connection, collection, id) }
    }

    func holds(_ token: Token) async throws -> Bool {
        try store.sqlite {
            guard token.database == store.databaseID else { return false }
            let horizon = UInt64(clamping: try connection.integer("SELECT CAST(value AS INTEGER) FROM meta WHERE key = 'horizon'") ?? 0)
            guard token.position >= horizon else { return false }
            return try store.commitTag(connection, at: token.position) == token.commit
        }
    }

    func lastMutation(client: String) async throws -> UInt64 {
        try store.sqlite { UInt64(clamping: try connection.integer("SELECT last_mutation FROM push_clients WHERE client = ?", .text(client)) ?? 0) }
    }

    func recorded(client: String, containing id: UInt64) async throws -> RecordedRun? {
        try store.sqlite {
            let query = try connection.statement(
                "SELECT first, digests, results FROM push_runs WHERE client = ? AND first <= ? ORDER BY first DESC LIMIT 1")
            defer { query.reset() }
            try query.bind([.text(client), .integer(Int64(clamping: id))])
            guard try query.step() else { return nil }
            return RecordedRun(first: UInt64(clamping: query.int64(0)), digests: query.bytes(1), results: query.bytes(2))
        }
    }

    func put(_ record: Record, replacing: Record?) async throws {
        try store.sqlite { try write(record, replacing: replacing) }
    }

    func markWritten(_ recordID: String, by client: String) async throws {
        try store.sqlite {
            try connection.statement("INSERT OR REPLACE INTO push_writers(collection, id, client, position) VALUES (?, ?, ?, ?)")
                .run(.text(collection.rawValue), .text(recordID), .text(client), .integer(Int64(try nextPosition())))
        }
    }

    func record(client: String, _ run: RecordedRun) async throws {
        try store.sqlite {
            try connection.statement("INSERT INTO push_runs(client, first, last, digests, results) VALUES (?, ?, ?, ?, ?)")
                .run(.text(client), .integer(Int64(run.first)), .integer(Int64(run.first) + Int64(run.count) - 1), .blob(run.digests), .blob(run.results))
            try connection.statement(
                "INSERT INTO push_clients(client, last_mutation) VALUES (?, ?) ON CONFLICT(client) DO UPDATE SET last_mutation = excluded.last_mutation"
            ).run(.text(client), .integer(Int64(run.first) + Int64(run.count) - 1))
        }
    }

    func forget(client: String, before id: UInt64) async throws {
        try store.sqlite {
            try connection.statement("DELETE FROM push_runs WHERE client = ? AND last < ?").run(.text(client), .integer(Int64(id)))
        }
    }

    func forEachBody(of collection: CollectionName, key: RowsKey?, _ visit: (UnsafeRawBufferPointer) throws -> Void) async throws {
        try store.sqlite { try store.forEachBody(connection, of: collection, at: nil, key: key, visit) }
    }

    func rulesVersion() async throws -> UInt64 {
        UInt64(clamping: try store.sqlite { try connection.integer("SELECT coalesce(max(version), 0) FROM rules") } ?? 0)
    }

    func owner(client: String) async throws -> String? {
        try store.sqlite { try connection.text(SQLiteStore.ownerQuery, .text(client)) }
    }

    func claim(client: String, for principal: String) async throws {
        try store.sqlite {
            try connection.statement("INSERT INTO client_principals(client, principal) VALUES (?, ?)").run(.text(client), .text(principal))
        }
    }

    func log(_ recordID: String, user: String?, client: String, mutation: UInt64, operation: String) async throws {
        try store.sqlite {
            try connection.statement(
                "INSERT INTO mutation_log(position, collection, id, user, client, mutation, operation, logged_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
            ).run(
                .integer(Int64(try nextPosition())), .text(collection.rawValue), .text(recordID), user.map { .text($0) } ?? .null, .text(client),
                .integer(Int64(clamping: mutation)), .text(operation), .integer(Int64(Date().timeIntervalSince1970)))
        }
    }
}

public import DeltaCore
import DeltaRules
public import DeltaStore
import Foundation
import PostgresNIO

extension PostgresStore {
    /// The record `id` of `collection`, hidden ones too: one statement, so one snapshot.
    public func record(_ id: String, in collection: CollectionName) async throws -> StoredRecord? {
        try await withReader { try await stored($0, collection, id) }
    }

    /// Reads the record with its commit's token and the client that pushed this version: a
    /// prepared statement, as every user's and app's write reads the record it replaces.
    /// `pendingTag` gives the tag of a commit not written yet (a write group's, `PostgresWriteGroup`).
    func stored(
        _ connection: PostgresConnection, _ collection: CollectionName, _ id: String, pendingTag: (Int64) -> Int64? = { _ in nil }
    ) async throws -> StoredRecord? {
        for try await (hidden, body, position, tag, writer) in try await connection.execute(StoredRead(collection: collection.rawValue, id: id), logger: logger)
        {
            guard let tag = tag ?? pendingTag(position) else {
                throw StoreError(.corrupt, "store \(location)", "a record names a commit that does not exist", evidence: "position \(position)")
            }
            let record = Record(id: id, hidden: hidden, canonicalBody: Array(body.readableBytesView))
            let token = Token(database: databaseID, position: UInt64(clamping: position), commit: UInt32(truncatingIfNeeded: tag))
            return StoredRecord(record: record, token: token, writer: writer)
        }
        return nil
    }

    /// One record, hidden or not, with its commit's tag and the client that pushed this version.
    struct StoredRead: PostgresPreparedStatement {
        static let name = "deltasnap_stored"
        static let sql = """
            SELECT r.hidden, r.body, r.position, c.tag, w.client FROM deltasnap.records r
            LEFT JOIN deltasnap.commits c ON c.position = r.position
            LEFT JOIN deltasnap.push_writers w ON w.collection = r.collection AND w.id = r.id AND w.position = r.position
            WHERE r.collection = $1 AND r.id = $2
            """
        typealias Row = (Bool, ByteBuffer, Int64, Int64?, String?)

        let collection: String
        let id: String

        func makeBindings() throws -> PostgresBindings {
            var binds = PostgresBindings(capacity: 2)
            binds.append(collection)
            binds.append(id)
            return binds
        }

        func decodeRow(_ row: PostgresRow) throws -> Row { try row.decode(Row.self) }
    }

    /// The principal `client` belongs to: one statement, so one snapshot.
    public func owner(ofClient client: String) async throws -> String? {
        try await withReader { try await owner($0, client) }
    }

    /// The principal of `client` on `connection`: the one recorded, else a user recorded before
    /// principals were (by bare `sub`).
    func owner(_ connection: PostgresConnection, _ client: String) async throws -> String? {
        var binds = PostgresBindings(capacity: 1)
        binds.append(client)
        let sql = """
            SELECT coalesce((SELECT principal FROM deltasnap.client_principals WHERE client = $1),
                            (SELECT 'user:' || "user" FROM deltasnap.client_owners WHERE client = $1))
            """
        for try await row in try await query(connection, sql, binds) { return try row.decode(String?.self) }
        return nil
    }
}

extension PostgresWriteTransaction: PushLedger {
    /// The record as this write sees it: a version written earlier in the group names a commit
    /// whose row the group writes when it commits, so its tag comes from the group.
    func stored(_ id: String) async throws -> StoredRecord? {
        let pending = group.commits
        do {
            return try await store.stored(connection, collection, id) { position in
                pending.first { $0.token.position == UInt64(clamping: position) }.map { Int64($0.token.commit) }
            }
        } catch {
            throw store.failure(error)  // a `StoreError` passes through as it is
        }
    }

    func holds(_ token: Token) async throws -> Bool {
        guard token.database == store.databaseID else { return false }
        if token.position == 0 { return true }
        var binds = PostgresBindings(capacity: 1)
        binds.append(Int64(clamping: token.position))
        let sql = """
            SELECT (SELECT tag FROM deltasnap.commits WHERE position = $1),
                   (SELECT value::bigint FROM deltasnap.meta WHERE key = 'horizon')
            """
        for try await row in try await run(sql, binds) {
            let (tag, horizon) = try row.decode((Int64?, Int64?).self)
            return tag.map { UInt32(truncatingIfNeeded: $0) } == token.commit && Int64(clamping: token.position) >= (horizon ?? 0)
        }
        return false
    }

    func lastMutation(client: String) async throws -> UInt64 {
        var binds = PostgresBindings(capacity: 1)
        binds.append(client)
        for try await row in try await run("SELECT last_mutation FROM deltasnap.push_clients WHERE client = $1", binds) {
            return UInt64(clamping: try row.decode(Int64.self))
        }
        return 0
    }

    func recorded(client: String, containing id: UInt64) async throws -> RecordedRun? {
        var binds = PostgresBindings(capacity: 2)
        binds.append(client)
        binds.append(Int64(clamping: id))
        let sql = "SELECT first, digests, results FROM deltasnap.push_runs WHERE client = $1 AND first <= $2 ORDER BY first DESC LIMIT 1"
        for try await row in try await run(sql, binds) {
            let (first, digests, results) = try row.decode((Int64, ByteBuffer, ByteBuffer).self)
            return RecordedRun(first: UInt64(clamping: first), digests: Array(digests.readableBytesView), results: Array(results.readableBytesView))
        }
        return nil
    }

    /// Upserts are already one statement per batch here, with no read before them (the
    /// statement itself finds the version it replaces, for the digest).
    func put(_ record: Record, replacing: Record?) async throws {
        try await upsert(record)
    }

    func markWritten(_ recordID: String, by client: String) async throws {
        var binds = PostgresBindings(capacity: 4)
        binds.append(collection.rawValue)
        binds.append(recordID)
        binds.append(client)
        binds.append(position)
        let sql = """
            INSERT INTO deltasnap.push_writers(collection, id, client, position) VALUES ($1, $2, $3, $4)
            ON CONFLICT (collection, id) DO UPDATE SET client = excluded.client, position = excluded.position
            """
        for try await _ in try await run(sql, binds) {}
    }

    /// One statement: the run kept, and the client's last id.
    func record(client: String, _ recorded: RecordedRun) async throws {
        var binds = PostgresBindings(capacity: 5)
        binds.append(client)
        binds.append(Int64(recorded.first))
        binds.append(Int64(recorded.first) + Int64(recorded.count) - 1)
        binds.append(ByteBuffer(bytes: recorded.digests))
        binds.append(ByteBuffer(bytes: recorded.results))
        let sql = """
            WITH kept AS (INSERT INTO deltasnap.push_runs(client, first, last, digests, results) VALUES ($1, $2, $3, $4, $5))
            INSERT INTO deltasnap.push_clients(client, last_mutation) VALUES ($1, $3)
            ON CONFLICT (client) DO UPDATE SET last_mutation = excluded.last_mutation
            """
        for try await _ in try await run(sql, binds) {}
    }

    func forget(client: String, before id: UInt64) async throws {
        var binds = PostgresBindings(capacity: 2)
        binds.append(client)
        binds.append(Int64(clamping: id))
        for try await _ in try await run("DELETE FROM deltasnap.push_runs WHERE client = $1 AND last < $2", binds) {}
    }

    /// A statement on this transaction's connection, its failures as `StoreError`s.
    func forEachBody(of collection: CollectionName, key: RowsKey?, _ visit: (UnsafeRawBufferPointer) throws -> Void) async throws {
        try await store.forEachBody(connection, of: collection, at: nil, key: key, visit)
    }

    func rulesVersion() async throws -> UInt64 {
        for try await row in try await run("SELECT coalesce(max(version), 0) FROM deltasnap.rules", PostgresBindings()) {
            return UInt64(clamping: try row.decode(Int64.self))
        }
        return 0
    }

    func owner(client: String) async throws -> String? {
        do { return try await store.owner(connection, client) } catch let error as StoreError { throw error } catch { throw store.failure(error) }
    }

    func claim(client: String, for principal: String) async throws {
        var binds = PostgresBindings(capacity: 2)
        binds.append(client)
        binds.append(principal)
        for try await _ in try await run("INSERT INTO deltasnap.client_principals(client, principal) VALUES ($1, $2)", binds) {}
    }

    func log(_ recordID: String, user: String?, client: String, mutation: UInt64, operation: String) async throws {
        var binds = PostgresBindings(capacity: 8)
        binds.append(position)
        binds.append(collection.rawValue)
        binds.append(recordID)
        binds.append(user)
        binds.append(client)
        binds.append(Int64(clamping: mutation))
        binds.append(operation)
        binds.append(Int64(Date().timeIntervalSince1970))
        let sql = """
            INSERT INTO deltasnap.mutation_log(position, collection, id, "user", client, mutation, operation, logged_at)
            VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
            """
        for try await _ in try await run(sql, binds) {}
    }

    private func run(_ sql: String, _ binds: PostgresBindings) async throws -> PostgresRowSequence {
        do { return try await store.query(connection, sql, binds) } catch { throw store.failure(error) }
    }
}

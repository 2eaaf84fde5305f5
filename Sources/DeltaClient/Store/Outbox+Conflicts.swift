import DeltaCore
import DeltaSQLite
import Foundation

extension Outbox {
    /// Every unresolved conflict, by collection and id.
    func conflicts() throws -> [Conflict<Record>] {
        try write { connection in
            let query = try connection.statement("SELECT collection, id FROM conflicts ORDER BY collection, id")
            var keys: [(String, String)] = []
            while try query.step() { keys.append((query.string(0), query.string(1))) }
            query.reset()
            return try keys.compactMap { try conflict($0.1, in: $0.0, connection) }
        }
    }

    /// The conflict of record `id`, read inside the caller's transaction.
    func conflict(_ id: String, in collection: String, _ connection: Connection) throws -> Conflict<Record>? {
        let query = try connection.statement(
            """
            SELECT c.mutation, c.reason, c.server, c.server_base, o.hidden, o.body FROM conflicts c
            JOIN overlay o ON o.collection = c.collection AND o.id = c.id WHERE c.collection = ? AND c.id = ?
            """)
        defer { query.reset() }
        try query.bind([.text(collection), .text(id)])
        guard try query.step() else { return nil }
        let server = query.isNull(2) ? nil : try? Record(parsing: query.bytes(2))
        let local = Record(id: id, hidden: query.int64(4) != 0, canonicalBody: query.bytes(5))
        return Conflict<Record>(
            collection: collection, id: id, reason: query.string(1), server: server, local: local,
            mutation: UInt64(clamping: query.int64(0)), serverBase: query.isNull(3) ? nil : query.string(3))
    }

    /// Drops the turned-down write `conflict` names, as `resolve(.keepServer)`, while it is still
    /// the record's conflict.
    func discard<Value>(_ conflict: Conflict<Value>) throws {
        try appWrite { connection in
            guard let held = try self.conflict(conflict.id, in: conflict.collection, connection), held.mutation == conflict.mutation else {
                throw ReplicaError(
                    .configuration, "no such turned-down write to discard: it was resolved, or a later write to the record replaced it",
                    evidence: "\(conflict.collection)/\(conflict.id), mutation \(conflict.mutation)")
            }
            try settle(conflict.id, in: conflict.collection, .keepServer, connection)
        }
    }

    /// Settles the conflict of record `id`: the server's copy shows until the next pull brings
    /// it for good; a local or merged version is queued on top of the server's current version.
    func resolve(_ id: String, in collection: String, _ resolution: Resolution<Record>) throws {
        try appWrite { connection in try settle(id, in: collection, resolution, connection) }
    }

    /// `resolve`, inside the caller's transaction.
    private func settle(_ id: String, in collection: String, _ resolution: Resolution<Record>, _ connection: Connection) throws {
        guard let conflict = try conflict(id, in: collection, connection) else {
            throw ReplicaError(.configuration, "no conflict to resolve", evidence: "\(collection)/\(id)")
        }
        try connection.statement("DELETE FROM conflicts WHERE collection = ? AND id = ?").run(.text(collection), .text(id))
        var local = conflict.localRecord
        switch resolution {
        case .keepServer:
            if let server = conflict.server {
                // The app now sees the server's copy: later edits are made on top of it.
                try show(server, in: collection, connection, base: conflict.serverBase)
                // Shown until a pull that includes the turned-down mutation's answer brings the server's data.
                try connection.statement("INSERT OR REPLACE INTO acknowledged(id, collection, record_id) VALUES (?, ?, ?)")
                    .run(.integer(Int64(conflict.mutation)), .text(collection), .text(id))
            } else {
                try connection.statement("DELETE FROM overlay WHERE collection = ? AND id = ?").run(.text(collection), .text(id))
            }
            return
        case .keepLocal:
            break
        case .merged(let record):
            guard record.id.hasSameBytes(as: id) else {  // bytes, as the store keys ids
                throw ReplicaError(
                    .configuration, "a merged record must keep its id", evidence: "\(String(reflecting: record.id)) for \(String(reflecting: id))")
            }
            local = Record(id: id, hidden: false, canonicalBody: record.body)
        }
        // Sent, and later edited, on top of the server's copy the conflict showed.
        try show(local, in: collection, connection, base: conflict.serverBase)
        try enqueue(local.hidden ? .delete : .put, id, body: local.hidden ? nil : local.body, create: false, collection, connection)
    }

    /// Where record `id` of `collection` stands.
    func state(of id: String, in collection: String) throws -> RecordState {
        try read { connection in
            if try connection.integer("SELECT 1 FROM conflicts WHERE collection = ? AND id = ?", .text(collection), .text(id)) != nil { return .conflicted }
            if try connection.integer("SELECT 1 FROM overlay WHERE collection = ? AND id = ?", .text(collection), .text(id)) != nil { return .pending }
            return .synced
        }
    }

    /// Per collection with local writes: how many records wait (pending) and how many are conflicted.
    func counts() throws -> [(collection: String, pending: Int, conflicted: Int)] {
        try read { connection in
            let query = try connection.statement(
                """
                SELECT o.collection, sum(c.id IS NULL), sum(c.id IS NOT NULL) FROM overlay o
                LEFT JOIN conflicts c ON c.collection = o.collection AND c.id = o.id GROUP BY o.collection ORDER BY o.collection
                """)
            defer { query.reset() }
            var rows: [(String, Int, Int)] = []
            while try query.step() { rows.append((query.string(0), Int(query.int64(1)), Int(query.int64(2)))) }
            return rows
        }
    }

    /// The records with writes the server does not have yet, the queued mutations, the
    /// conflicts, and the denied writes, from one read.
    func tally() throws -> (pending: Int, queued: Int, conflicts: Int, denied: Int) {
        try read { connection in
            let query = try connection.statement(
                """
                SELECT (SELECT count(*) FROM (SELECT DISTINCT collection, record_id FROM mutations m
                        WHERE NOT EXISTS (SELECT 1 FROM conflicts c WHERE c.collection = m.collection AND c.id = m.record_id))),
                       (SELECT count(*) FROM mutations),
                       (SELECT count(*) FROM conflicts WHERE reason NOT LIKE 'denied%'),
                       (SELECT count(*) FROM conflicts WHERE reason LIKE 'denied%')
                """)
            defer { query.reset() }
            _ = try query.step()
            return (Int(query.int64(0)), Int(query.int64(1)), Int(query.int64(2)), Int(query.int64(3)))
        }
    }
}

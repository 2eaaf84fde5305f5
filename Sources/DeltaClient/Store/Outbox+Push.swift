import DeltaCore
import DeltaSQLite
import Foundation

extension Outbox {
    /// Whether writes to `collection` the server applied wait for a pull to confirm them.
    func awaitsConfirmation(_ collection: String) throws -> Bool {
        try read { try $0.integer("SELECT 1 FROM acknowledged WHERE collection = ? LIMIT 1", .text(collection)) != nil }
    }

    /// Whether any mutation waits to be pushed.
    func hasQueued() throws -> Bool {
        try read { try $0.integer("SELECT 1 FROM mutations LIMIT 1") != nil }
    }

    /// The oldest queued mutations, at most `limit`, given their ids before they leave: from then
    /// on they may have reached the server, so they are never collapsed, only resent as they are.
    func nextBatch(limit: Int) throws -> [Mutation] {
        try write { try batch($0, limit: limit) }
    }

    /// Numbers and reads the next batch inside the caller's transaction.
    private func batch(_ connection: Connection, limit: Int) throws -> [Mutation] {
        // Ids for the mutations that never left, continuing the last one given, in queue order.
        let last = try connection.integer("SELECT CAST(value AS INTEGER) FROM meta WHERE key = 'last_mutation'") ?? 0
        try connection.statement(
            """
            UPDATE mutations SET mutation = numbered.id FROM (
                SELECT seq, ?1 + row_number() OVER (ORDER BY seq) AS id FROM mutations WHERE mutation IS NULL ORDER BY seq LIMIT ?2
            ) AS numbered WHERE mutations.seq = numbered.seq
            """
        ).run(.integer(last), .integer(Int64(limit)))
        if connection.changes > 0 {
            try connection.statement("INSERT OR REPLACE INTO meta(key, value) VALUES ('last_mutation', ?)").run(.text(String(last + Int64(connection.changes))))
        }
        let query = try connection.statement(
            "SELECT mutation, collection, record_id, op, body, base, is_create FROM mutations WHERE mutation IS NOT NULL ORDER BY mutation LIMIT ?")
        defer { query.reset() }
        try query.bind([.integer(Int64(limit))])
        var batch: [Mutation] = []
        while try query.step() {
            let id = UInt64(clamping: query.int64(0))
            let collection = try CollectionName(query.string(1))
            // An empty stored base (queued before `enqueue` turned it into null) goes as null: the
            // server refused every push that held it, so it recorded none of it, and the digest
            // reads a null base as "", so the mutation is the same one to the server.
            let base = Self.sentBase(query.isNull(5) ? nil : query.string(5))
            if query.string(3) == Mutation.Operation.delete.rawValue {
                batch.append(Mutation(id: id, collection: collection, delete: query.string(2), base: base))
            } else {
                let record = Record(id: query.string(2), hidden: false, canonicalBody: query.bytes(4))
                batch.append(Mutation(id: id, collection: collection, put: record, base: base, create: query.int64(6) != 0))
            }
        }
        return batch
    }

    /// Applies the server's answer to a batch: applied mutations wait for a pull to confirm
    /// them; turned-down ones become conflicts, holding the local version (later unsent edits of
    /// the record fold into it).
    /// The next batch (at most `next` mutations) is numbered in the same transaction: one commit per batch.
    func settle(_ answer: PushResponse, sent batch: [Mutation], next: Int) throws -> (summary: PushSummary, next: [Mutation]) {
        let byID = Dictionary(uniqueKeysWithValues: batch.map { ($0.id, $0) })
        return try write { connection in
            var summary = PushSummary()
            var anyConflicts = try connection.integer("SELECT 1 FROM conflicts LIMIT 1") != nil
            for result in answer.results {
                guard let mutation = byID[result.id] else { continue }
                let collection = mutation.collection.rawValue
                switch result.status {
                case .applied, .unchanged:
                    if result.status == .applied { summary.applied += 1 } else { summary.unchanged += 1 }
                    // A later mutation of the same batch that applied settles an earlier one's conflict.
                    if anyConflicts {
                        try connection.statement("DELETE FROM conflicts WHERE collection = ? AND id = ? AND mutation < ?")
                            .run(.text(collection), .text(mutation.recordID), .integer(Int64(result.id)))
                        summary.conflicts.removeAll { $0.collection == collection && $0.id.hasSameBytes(as: mutation.recordID) }
                    }
                case .conflict, .invalid, .denied:
                    anyConflicts = true
                    let reason =
                        switch result.status {
                        case .invalid: "invalid: \(result.reason ?? "unusable record")"
                        case .denied: "denied: \(result.rule ?? "write")"
                        default: result.reason ?? "changed"
                        }
                    try connection.statement("DELETE FROM mutations WHERE mutation = ?").run(.integer(Int64(result.id)))
                    try connection.statement("DELETE FROM mutations WHERE collection = ? AND record_id = ? AND mutation IS NULL")
                        .run(.text(collection), .text(mutation.recordID))
                    try connection.statement(
                        "INSERT OR REPLACE INTO conflicts(collection, id, mutation, reason, server, server_base) VALUES (?, ?, ?, ?, ?, ?)"
                    )
                    .run(
                        .text(collection), .text(mutation.recordID), .integer(Int64(result.id)), .text(reason),
                        result.server.map { .text(String(decoding: $0.wireJSON, as: UTF8.self)) } ?? .null,
                        result.base.map { .text($0) } ?? .null)
                    summary.conflicts.removeAll { $0.collection == collection && $0.id.hasSameBytes(as: mutation.recordID) }
                    if let conflict = try conflict(mutation.recordID, in: collection, connection) { summary.conflicts.append(conflict) }
                }
            }
            // What is left of the answered range was applied (or already held): it waits for a pull to confirm it.
            if let first = answer.results.first?.id, let last = answer.results.last?.id {
                try connection.statement(
                    "INSERT OR REPLACE INTO acknowledged(id, collection, record_id) SELECT mutation, collection, record_id FROM mutations WHERE mutation BETWEEN ? AND ?"
                ).run(.integer(Int64(first)), .integer(Int64(last)))
                try connection.statement("DELETE FROM mutations WHERE mutation BETWEEN ? AND ?").run(.integer(Int64(first)), .integer(Int64(last)))
            }
            return (summary, try self.batch(connection, limit: next))
        }
    }

    /// After a pull of `collection` whose data includes this client's mutations up to
    /// `lastMutation`: local versions those mutations wrote give way to the server's data.
    func pulled(_ collection: String, lastMutation: UInt64) throws {
        let last = Int64(clamping: lastMutation)
        try write { connection in
            try connection.statement(
                """
                DELETE FROM overlay WHERE collection = ?1
                  AND id IN (SELECT record_id FROM acknowledged WHERE collection = ?1 AND id <= ?2)
                  AND NOT EXISTS (SELECT 1 FROM mutations m WHERE m.collection = ?1 AND m.record_id = overlay.id)
                  AND NOT EXISTS (SELECT 1 FROM acknowledged a WHERE a.collection = ?1 AND a.record_id = overlay.id AND a.id > ?2)
                  AND NOT EXISTS (SELECT 1 FROM conflicts c WHERE c.collection = ?1 AND c.id = overlay.id)
                """
            ).run(.text(collection), .integer(last))
            try connection.statement("DELETE FROM acknowledged WHERE collection = ? AND id <= ?").run(.text(collection), .integer(last))
        }
    }
}

extension Outbox {
    /// Starts the numbering again after `last`, for a server that has none of this client's
    /// mutations after it (a new database, say): queued mutations get new ids when next sent,
    /// and writes the old server applied but no pull confirmed are queued again, so nothing the
    /// user wrote is lost. Safe because the server has recorded none of the ids given before.
    func restartNumbering(after last: UInt64) throws {
        try write { connection in
            let waiting = try connection.statement(
                """
                SELECT DISTINCT a.collection, a.record_id, o.hidden, o.body FROM acknowledged a
                JOIN overlay o ON o.collection = a.collection AND o.id = a.record_id
                WHERE NOT EXISTS (SELECT 1 FROM mutations m WHERE m.collection = a.collection AND m.record_id = a.record_id)
                  AND NOT EXISTS (SELECT 1 FROM conflicts c WHERE c.collection = a.collection AND c.id = a.record_id)
                """)
            var requeue: [(String, String, Bool, [UInt8])] = []
            while try waiting.step() { requeue.append((waiting.string(0), waiting.string(1), waiting.int64(2) != 0, waiting.bytes(3))) }
            waiting.reset()
            try connection.execute("DELETE FROM acknowledged; UPDATE mutations SET mutation = NULL")
            for (collection, id, hidden, body) in requeue {
                // Against the collection as the replica holds it now: the old base names the old database.
                try show(Record(id: id, hidden: hidden, canonicalBody: body), in: collection, connection, base: collectionETag(collection, connection))
                try enqueue(hidden ? .delete : .put, id, body: hidden ? nil : body, create: false, collection, connection)
            }
            try connection.statement("INSERT OR REPLACE INTO meta(key, value) VALUES ('last_mutation', ?)").run(.text(String(last)))
        }
    }

    /// Whether this install's client id has numbered a mutation (it may have reached the server).
    func hasNumbered() throws -> Bool {
        try read { try $0.integer("SELECT CAST(value AS INTEGER) FROM meta WHERE key = 'last_mutation'") ?? 0 } > 0
    }

    /// Gives the install a new client id and numbers its queue again from 1 under it, keeping
    /// every write not yet applied: for a user's first sign-in on an install that pushed without
    /// one. A client id belongs to the principal that first pushed with it (the client key here),
    /// so the user's pushes need their own. Writes the server applied under the old id count as
    /// confirmed (their local versions give way to what the next pull brings, which is what the
    /// user may read of them); a write whose answer was lost is sent again, once, under the new
    /// id, where the server answers it `unchanged` or as a conflict: never lost.
    func startNewClient() throws {
        let id = UUID().uuidString.lowercased()
        try write { connection in
            try connection.execute(
                """
                DELETE FROM overlay WHERE EXISTS (SELECT 1 FROM acknowledged a WHERE a.collection = overlay.collection AND a.record_id = overlay.id)
                  AND NOT EXISTS (SELECT 1 FROM mutations m WHERE m.collection = overlay.collection AND m.record_id = overlay.id)
                  AND NOT EXISTS (SELECT 1 FROM conflicts c WHERE c.collection = overlay.collection AND c.id = overlay.id);
                DELETE FROM acknowledged;
                UPDATE mutations SET mutation = NULL;
                INSERT OR REPLACE INTO meta(key, value) VALUES ('last_mutation', '0');
                """)
            try connection.statement("INSERT OR REPLACE INTO meta(key, value) VALUES ('client', ?)").run(.text(id))
        }
        identity.withLock { $0 = id }
    }
}

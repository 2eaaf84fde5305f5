import DeltaCore
import DeltaSQLite
import Foundation

/// The app's own writes, kept until the server has them: the queue of mutations to push, the
/// local version of every record they touch (what reads show), and the conflicts to resolve.
///
/// It lives in a file of its own beside the store (`ReplicaFiles` owns both), so that rebuilding
/// a damaged store, or resetting a collection to the bundled snapshot, never touches an edit the
/// user made. Every change to it is one SQLite transaction (WAL, `synchronous=FULL`). Apps reach
/// it through `Replica`, tools through `ReplicaFiles`.
final class Outbox: Sendable {
    /// The outbox file.
    let url: URL
    /// This app install's client id (a UUID made when the outbox was created): the server counts its mutations.
    var clientID: String { identity.withLock { $0 } }
    /// The current client id; a sign-out gives the install a new one (`discardAll`).
    let identity: Locked<String>
    let connection: Locked<Connection>
    /// How many sign-outs are under way: while any is, the app's writes are refused inside the
    /// outbox's own lock, so none lands between a sign-out's check and its discard.
    private let signingOut = Locked(0)
    private let changes: ChangeHub

    /// Opens (creating when missing) the outbox of the store at `storeURL`; its commits wake the
    /// live queries of `changes` (`ChangeLog`).
    init(files storeURL: URL, changes: ChangeHub) throws {
        url = ReplicaFiles.outboxURL(forStore: storeURL)
        self.changes = changes
        do {
            let (connection, clientID) = try ReplicaFiles.outboxConnection(storeURL)
            try ChangeLog.install(on: connection, tables: ["main.overlay", "main.conflicts", "store.records"], store: "store")
            self.connection = Locked(connection)
            identity = Locked(clientID)
        } catch let error as SQLiteError {
            throw ReplicaError("cannot open the outbox", storing: error, path: url.path)
        }
    }

    /// Runs `body` in one immediate transaction on the outbox; then wakes the live queries of the
    /// collections it changed.
    /// With `now`, the live queries wake at once even while a sync holds the hub: an app's own
    /// write shows while a sync's network steps run.
    func write<T>(now: Bool = false, _ body: (Connection) throws -> T) throws -> T {
        do {
            return try connection.withLock { connection in
                try changes.writing(on: connection, now: now) { try connection.transaction(.immediate) { try body(connection) } }
            }
        } catch let error as SQLiteError {
            throw ReplicaError("cannot write the outbox", storing: error, path: url.path)
        }
    }

    /// Runs `body` in one immediate transaction for an app's write (`put`, `delete`, `resolve`,
    /// `discard`): refused while a sign-out is under way.
    func appWrite<T>(_ body: (Connection) throws -> T) throws -> T {
        try write(now: true) { connection in
            guard signingOut.withLock({ $0 }) == 0 else {
                throw ReplicaError(.configuration, "the replica is signing out; the write was not kept", evidence: url.path)
            }
            return try body(connection)
        }
    }

    /// Marks a sign-out as begun (`true`) or ended: taken under the outbox's lock, so a write
    /// already running finishes first and every later one is refused until it ends.
    func signOut(_ begun: Bool) {
        connection.withLock { _ in signingOut.withLock { $0 += begun ? 1 : -1 } }
    }

    /// Runs `body` on the outbox's connection, for reads.
    func read<T>(_ body: (Connection) throws -> T) throws -> T {
        do {
            return try connection.withLock { try body($0) }
        } catch let error as SQLiteError {
            throw ReplicaError("cannot read the outbox", storing: error, path: url.path)
        }
    }

    /// Writes `record` into `collection` locally: visible to reads at once, queued for the next push.
    func put(_ record: Record, in collection: String) throws { try put([record], in: collection) }

    /// Writes `records` into `collection` locally, in one transaction: all of them or none.
    func put(_ records: [Record], in collection: String) throws {
        let name = try validated(collection)
        try appWrite { connection in
            for var record in records {
                record.hidden = false
                let exists = try visible(record.id, name, connection)
                try show(record, in: name, connection)
                try enqueue(.put, record.id, body: record.body, create: !exists, name, connection)
            }
        }
    }

    /// Deletes (hides) record `id` of `collection` locally: gone from reads at once, queued for the next push.
    func delete(_ id: String, in collection: String) throws {
        let name = try validated(collection)
        try appWrite { connection in
            let body = try currentBody(id, name, connection) ?? Array(JSONValue.object([JSONMember(key: "id", value: .string(id))]).canonicalBytes)
            try show(Record(id: id, hidden: true, canonicalBody: body), in: name, connection)
            try enqueue(.delete, id, body: nil, create: false, name, connection)
        }
    }

    /// Queues a mutation, collapsing it into the newest unsent one of the same record: create then
    /// edit is one create, create then delete is nothing, edit then delete is a delete, several
    /// edits are the last. A mutation that may have reached the server is never changed.
    func enqueue(
        _ op: Mutation.Operation, _ id: String, body: [UInt8]?, create: Bool, _ collection: String, _ connection: Connection
    ) throws {
        if try connection.integer("SELECT 1 FROM conflicts WHERE collection = ? AND id = ?", .text(collection), .text(id)) != nil {
            return  // the conflict holds the local version until it is resolved
        }
        let text: SQLValue = body.map { .text(String(decoding: $0, as: UTF8.self)) } ?? .null
        let last = try connection.statement(
            "SELECT seq, is_create, mutation IS NOT NULL FROM mutations WHERE collection = ? AND record_id = ? ORDER BY seq DESC LIMIT 1")
        try last.bind([.text(collection), .text(id)])
        let previous = try last.step() ? (seq: last.int64(0), create: last.int64(1) != 0, sent: last.int64(2) != 0) : nil
        last.reset()
        if let previous, !previous.sent {
            if previous.create && op == .delete {
                try connection.statement("DELETE FROM mutations WHERE seq = ?").run(.integer(previous.seq))
                if try !hasHistory(id, collection, connection) {
                    try connection.statement("DELETE FROM overlay WHERE collection = ? AND id = ?").run(.text(collection), .text(id))
                }
                return
            }
            try connection.statement("UPDATE mutations SET op = ?, body = ? WHERE seq = ?").run(.text(op.rawValue), text, .integer(previous.seq))
            return
        }
        // The server copy the app last saw of this record (`show` keeps it with the local version);
        // the collection's base when it has none (`collectionETag`).
        let base = Self.sentBase(
            try connection.text("SELECT base FROM overlay WHERE collection = ? AND id = ?", .text(collection), .text(id))
                ?? collectionETag(collection, connection))
        // The mutation id the server sees is given when the mutation is first sent (`nextBatch`),
        // so that ids stay consecutive however the queue collapses.
        try connection.statement("INSERT INTO mutations(collection, record_id, op, body, base, is_create) VALUES (?, ?, ?, ?, ?, ?)")
            .run(.text(collection), .text(id), .text(op.rawValue), text, base.map { .text($0) } ?? .null, .integer(create ? 1 : 0))
    }

    /// Whether the server may know of the record through this app: an earlier mutation was sent, or acknowledged.
    private func hasHistory(_ id: String, _ collection: String, _ connection: Connection) throws -> Bool {
        try connection.integer(
            "SELECT 1 FROM mutations WHERE collection = ?1 AND record_id = ?2 UNION ALL SELECT 1 FROM acknowledged WHERE collection = ?1 AND record_id = ?2 LIMIT 1",
            .text(collection), .text(id)) != nil
    }

    /// Whether the app sees record `id`: its local version, or the server's.
    private func visible(_ id: String, _ collection: String, _ connection: Connection) throws -> Bool {
        if let hidden = try connection.integer("SELECT hidden FROM overlay WHERE collection = ? AND id = ?", .text(collection), .text(id)) {
            return hidden == 0
        }
        return try connection.integer("SELECT 1 FROM store.records WHERE collection = ? AND id = ?", .text(collection), .text(id)) != nil
    }

    /// The body the app sees for record `id`, hidden local versions included.
    private func currentBody(_ id: String, _ collection: String, _ connection: Connection) throws -> [UInt8]? {
        if let body = try connection.text("SELECT body FROM overlay WHERE collection = ? AND id = ?", .text(collection), .text(id)) { return Array(body.utf8) }
        return try connection.text("SELECT body FROM store.records WHERE collection = ? AND id = ?", .text(collection), .text(id)).map { Array($0.utf8) }
    }

    /// The collection's name, checked: a valid name, of a collection the store holds.
    func validated(_ collection: String) throws -> String {
        do { _ = try CollectionName(collection) } catch {
            throw ReplicaError(.configuration, "not a collection name", evidence: "\(error)")
        }
        let known = try read { connection -> [String] in
            let query = try connection.statement("SELECT name FROM store.collections ORDER BY name")
            defer { query.reset() }
            var names: [String] = []
            while try query.step() { names.append(query.string(0)) }
            return names
        }
        guard known.contains(collection) else {
            throw ReplicaError(
                .configuration, "the replica holds no such collection",
                evidence: "\(collection); it holds \(known.isEmpty ? "none" : known.joined(separator: ", "))")
        }
        return collection
    }
}

import DeltaCore
import DeltaSQLite
import Foundation

/// Read access to a replica's local store: by id, all visible records, counts. Reads work
/// offline and never wait for a sync; each one sees one committed state. They show the records
/// as the app sees them: the server's data with the app's own pending writes (the outbox) over it.
public final class ReplicaReader: Sendable {
    private let connections: ReaderPool
    /// The collections the store holds (those of its bundled snapshot), read once at open: a
    /// read of any other is an error, not an empty answer (a misspelled name shows at once).
    let known: Set<String>

    /// Opens the store at `storeURL` for reading (it must exist): for tools that only read, like
    /// `deltasnap dump` (`ReplicaFiles.reader()`).
    public init(storeURL: URL) throws {
        do {
            let opened = try ReplicaFiles.readerConnection(storeURL)
            var names: Set<String> = []
            let query = try opened.statement("SELECT name FROM collections")
            while try query.step() { names.insert(query.string(0)) }
            query.reset()
            known = names
            connections = ReaderPool(first: opened) { try ReplicaFiles.readerConnection(storeURL) }
        } catch let error as SQLiteError {
            throw ReplicaError("cannot open the local store", storing: error, path: storeURL.path)
        }
    }

    /// A configuration error unless the store holds `collection`.
    func check(_ collection: String) throws {
        guard known.contains(collection) else { throw ReplicaError.unknownCollection(collection, known: known) }
    }

    /// The visible record `id` of `collection`, or nil: the app's own pending version when it has
    /// one. Works offline; never waits for a sync.
    public func record(_ id: String, in collection: String) throws -> Record? {
        try check(collection)
        return try read { connection in
            let statement = try connection.statement(Self.visibleRecord)
            defer { statement.reset() }
            try statement.bind([.text(collection), .text(id)])
            guard try statement.step(), statement.int64(1) == 0 else { return nil }
            return Record(id: id, hidden: false, canonicalBody: statement.bytes(2))
        }
    }

    /// A record's visible version (`?1` its collection, `?2` its id): the app's own (`local` 0,
    /// `hidden` as the app left it) over the server's (`local` 1).
    static let visibleRecord = """
        SELECT 0 AS local, hidden, body FROM outbox.overlay WHERE collection = ?1 AND id = ?2
        UNION ALL SELECT 1, 0, body FROM records WHERE collection = ?1 AND id = ?2 ORDER BY local LIMIT 1
        """

    /// Decodes the visible record `id` of `collection` as `T`, or returns nil when there is none.
    public func record<T: Decodable>(_ id: String, in collection: String, as type: T.Type, decoder: JSONDecoder = JSONDecoder()) throws -> T? {
        guard let record = try record(id, in: collection) else { return nil }
        return try decoder.decode(T.self, from: Data(record.body))
    }

    /// Calls `body` with every visible record of `collection`, sorted by id, from one consistent
    /// read: a sync that commits meanwhile is not seen half-way. `body` may read this reader
    /// again (another record, another collection): such a read takes a connection of its own,
    /// never waits for the one it is inside of, and sees the newest committed state.
    public func forEachRecord(in collection: String, _ body: (Record) throws -> Void) throws {
        try check(collection)
        try read { connection in
            try connection.transaction {
                // Two walks in id order, merged: the server's records and the app's own versions over them.
                // Ids compare by their bytes, as SQLite orders them (Swift's `==` is canonical equivalence).
                let server = try connection.statement("SELECT id, body FROM records WHERE collection = ? ORDER BY id")
                let local = try connection.statement("SELECT id, hidden, body FROM outbox.overlay WHERE collection = ? ORDER BY id")
                defer {
                    server.reset()
                    local.reset()
                }
                try server.bind([.text(collection)])
                try local.bind([.text(collection)])
                var serverRow = try server.step() ? server.string(0) : nil
                var localRow = try local.step() ? local.string(0) : nil
                while serverRow != nil || localRow != nil {
                    if let id = localRow, serverRow.map({ !$0.utf8.lexicographicallyPrecedes(id.utf8) }) ?? true {
                        if local.int64(1) == 0 { try body(Record(id: id, hidden: false, canonicalBody: local.bytes(2))) }
                        if serverRow?.hasSameBytes(as: id) == true { serverRow = try server.step() ? server.string(0) : nil }
                        localRow = try local.step() ? local.string(0) : nil
                    } else if let id = serverRow {
                        try body(Record(id: id, hidden: false, canonicalBody: server.bytes(1)))
                        serverRow = try server.step() ? server.string(0) : nil
                    }
                }
            }
        }
    }

    /// Every visible record of `collection`, sorted by id (use `forEachRecord` for large collections).
    public func records(in collection: String) throws -> [Record] {
        var records: [Record] = []
        try forEachRecord(in: collection) { records.append($0) }
        return records
    }

    /// How many visible records `collection` holds.
    public func count(in collection: String) throws -> Int {
        try check(collection)
        return try read { connection in
            Int(
                try connection.integer(
                    """
                    SELECT (SELECT count(*) FROM records WHERE collection = ?1)
                         - (SELECT count(*) FROM outbox.overlay o JOIN records r ON r.collection = o.collection AND r.id = o.id WHERE o.collection = ?1)
                         + (SELECT count(*) FROM outbox.overlay WHERE collection = ?1 AND hidden = 0)
                    """, .text(collection)) ?? 0)
        }
    }

    /// The server's `ETag` stored with `collection`'s data: the token its next sync sends.
    public func entityTag(of collection: String) throws -> String? {
        try check(collection)
        return try read { connection in try connection.text("SELECT etag FROM collections WHERE name = ?", .text(collection)) }
    }

    /// Runs `body` while no read of this reader is open (a sign-out empties the logs meanwhile).
    func holding<T>(_ body: () throws -> T) throws -> T {
        try connections.exclusively(body)
    }

    /// Runs `body` on a read connection of its own: reads run in parallel (`ReaderPool`).
    func read<T>(_ body: (Connection) throws -> T) throws -> T {
        do {
            return try connections.read(body)
        } catch let error as SQLiteError {
            throw ReplicaError("cannot read the local store", storing: error, path: "store")
        }
    }
}

extension Replica {
    /// The visible record `id` of `collection`, or nil. Works offline; never waits for a sync and
    /// never blocks the caller's thread.
    public func record(_ id: String, in collection: String) async throws -> Record? {
        try await background { [reader] in try reader.record(id, in: collection) }
    }

    /// Decodes the visible record `id` of `collection` as `T`, or returns nil when there is none.
    public func record<T: Decodable & Sendable>(_ id: String, in collection: String, as type: T.Type, decoder: JSONDecoder = JSONDecoder()) async throws -> T? {
        guard let record = try await record(id, in: collection) else { return nil }
        return try decoder.decode(T.self, from: Data(record.body))
    }

    /// Calls `body` with every visible record of `collection`, sorted by id, from one consistent
    /// read, on a background thread (memory stays flat whatever the collection's size).
    public func forEachRecord(in collection: String, _ body: @escaping @Sendable (Record) throws -> Void) async throws {
        try await background { [reader] in try reader.forEachRecord(in: collection, body) }
    }

    /// Every visible record of `collection`, sorted by id (use `forEachRecord` for large collections).
    public func records(in collection: String) async throws -> [Record] {
        try await background { [reader] in try reader.records(in: collection) }
    }

    /// How many visible records `collection` holds.
    public func count(in collection: String) async throws -> Int {
        try await background { [reader] in try reader.count(in: collection) }
    }

    /// The server's `ETag` stored with `collection`'s data: the token its next sync sends.
    public func entityTag(of collection: String) async throws -> String? {
        try await background { [reader] in try reader.entityTag(of: collection) }
    }
}

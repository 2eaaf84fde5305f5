import DeltaCore
import DeltaSQLite
import Foundation

/// Read access to a replica's local store: by id, all visible records, counts. Reads work
/// offline and never wait for a sync; each one sees one committed state.
public final class ReplicaReader: Sendable {
    private let connection: Locked<Connection>

    /// Opens the store at `storeURL` for reading (it must exist): for tools that only read, like `deltasnap dump`.
    public init(storeURL: URL) throws {
        do {
            let connection = try Connection(path: storeURL.path, mode: .readOnly)
            guard try connection.integer("PRAGMA user_version") == ReplicaDatabase.schemaVersion else {
                throw ReplicaError(.store, "not a replica store of this version", evidence: storeURL.path)
            }
            self.connection = Locked(connection)
        } catch let error as SQLiteError {
            throw ReplicaError(.store, "cannot open the local store", evidence: "\(storeURL.path): \(error)")
        }
    }

    /// The visible record `id` of `collection`, or nil. Works offline; never waits for a sync.
    public func record(_ id: String, in collection: String) throws -> Record? {
        try read { connection in
            let statement = try connection.statement("SELECT body FROM records WHERE collection = ? AND id = ?")
            defer { statement.reset() }
            try statement.bind([.text(collection), .text(id)])
            guard try statement.step() else { return nil }
            return Record(id: id, hidden: false, canonicalBody: statement.bytes(0))
        }
    }

    /// Decodes the visible record `id` of `collection` as `T`, or returns nil when there is none.
    public func record<T: Decodable>(_ id: String, in collection: String, as type: T.Type, decoder: JSONDecoder = JSONDecoder()) throws -> T? {
        guard let record = try record(id, in: collection) else { return nil }
        return try decoder.decode(T.self, from: Data(record.body))
    }

    /// Calls `body` with every visible record of `collection`, sorted by id, from one consistent
    /// read: a sync that commits meanwhile is not seen half-way.
    public func forEachRecord(in collection: String, _ body: (Record) throws -> Void) throws {
        try read { connection in
            let statement = try connection.statement("SELECT id, body FROM records WHERE collection = ? ORDER BY id")
            defer { statement.reset() }
            try statement.bind([.text(collection)])
            while try statement.step() {
                try body(Record(id: statement.string(0), hidden: false, canonicalBody: statement.bytes(1)))
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
        try read { connection in Int(try connection.integer("SELECT count(*) FROM records WHERE collection = ?", .text(collection)) ?? 0) }
    }

    /// The server's `ETag` stored with `collection`'s data: the token its next sync sends.
    public func entityTag(of collection: String) throws -> String? {
        try read { connection in try connection.text("SELECT etag FROM collections WHERE name = ?", .text(collection)) }
    }

    private func read<T>(_ body: (Connection) throws -> T) throws -> T {
        do {
            return try connection.withLock { try body($0) }
        } catch let error as SQLiteError {
            throw ReplicaError(.store, "cannot read the local store", evidence: "\(error)")
        }
    }
}

extension Replica {
    /// The visible record `id` of `collection`, or nil. Works offline; never waits for a sync.
    public func record(_ id: String, in collection: String) throws -> Record? { try reader.record(id, in: collection) }

    /// Decodes the visible record `id` of `collection` as `T`, or returns nil when there is none.
    public func record<T: Decodable>(_ id: String, in collection: String, as type: T.Type, decoder: JSONDecoder = JSONDecoder()) throws -> T? {
        try reader.record(id, in: collection, as: type, decoder: decoder)
    }

    /// Calls `body` with every visible record of `collection`, sorted by id, from one consistent read.
    public func forEachRecord(in collection: String, _ body: (Record) throws -> Void) throws { try reader.forEachRecord(in: collection, body) }

    /// Every visible record of `collection`, sorted by id (use `forEachRecord` for large collections).
    public func records(in collection: String) throws -> [Record] { try reader.records(in: collection) }

    /// How many visible records `collection` holds.
    public func count(in collection: String) throws -> Int { try reader.count(in: collection) }

    /// The server's `ETag` stored with `collection`'s data: the token its next sync sends.
    public func entityTag(of collection: String) throws -> String? { try reader.entityTag(of: collection) }
}

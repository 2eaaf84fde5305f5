import DeltaCore
import DeltaSQLite
import DeltaStore

/// Each collection's state digest (`StateDigest`), one row in `digests`, changed by every commit
/// in the same transaction as its records, and read by every read in the same transaction as its
/// token: the digest a read returns is the digest at its token.
extension SQLiteStore {
    /// The digest of `collection` in the open transaction on `connection` (empty without a row).
    static func digest(_ connection: Connection, _ collection: CollectionName) throws -> StateDigest {
        let statement = try connection.statement("SELECT digest FROM digests WHERE collection = ?")
        defer { statement.reset() }
        try statement.bind([.text(collection.rawValue)])
        guard try statement.step() else { return .empty }
        guard let digest = statement.withBytes(0, { StateDigest(bytes: $0) }) else {
            throw StoreError(.corrupt, "digest of \(collection)", "is not 32 bytes", evidence: "\(statement.withBytes(0) { $0.count }) bytes")
        }
        return digest
    }

    /// Adds a commit's `change` to the stored digest and visible count of `collection`, inside the write transaction.
    func addDigest(_ connection: Connection, _ collection: CollectionName, _ change: StateChange) throws {
        var digest = try Self.digest(connection, collection)
        digest.add(change.digest)
        let records = try connection.integer("SELECT records FROM digests WHERE collection = ?", .text(collection.rawValue)) ?? 0
        try connection.statement("INSERT OR REPLACE INTO digests(collection, digest, records) VALUES (?, ?, ?)")
            .run(.text(collection.rawValue), .blob(digest.bytes), .integer(records + Int64(change.records)))
    }

    /// Computes every collection's digest from its records once, for a database from before
    /// digests were kept (`meta` key `digests_since` then records the position it was done at).
    static func computeDigests(_ connection: Connection) throws {
        guard try connection.text("SELECT value FROM meta WHERE key = 'digests_since'") == nil else { return }
        try connection.execute("DELETE FROM digests")
        let rows = try connection.statement("SELECT collection, body FROM records WHERE hidden = 0 ORDER BY collection")
        defer { rows.reset() }
        var current: String?
        var digest = StateDigest.empty
        var count: Int64 = 0
        func flush() throws {
            guard let current else { return }
            try connection.statement("INSERT INTO digests(collection, digest, records) VALUES (?, ?, ?)").run(
                .text(current), .blob(digest.bytes), .integer(count))
        }
        while try rows.step() {
            let collection = rows.string(0)
            if collection != current {
                try flush()
                current = collection
                digest = .empty
                count = 0
            }
            rows.withBytes(1) { digest.add(body: $0) }
            count += 1
        }
        try flush()
        try connection.statement("INSERT INTO meta(key, value) SELECT 'digests_since', coalesce(max(position), 0) FROM commits").run()
    }
}

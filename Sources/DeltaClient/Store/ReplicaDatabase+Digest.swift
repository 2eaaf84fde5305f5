import DeltaCore
import DeltaSQLite

/// The replica's side of the state digest (`StateDigest`): each collection's digest of the
/// records it holds, kept in `sync_state` as `digest:<collection>` and changed in the same
/// transaction as the records. Every change reads the version it replaces from the table, so a
/// record changed behind the replica's back shows up as a mismatch as soon as an answer touches it.
extension ReplicaDatabase {
    /// The stored digest of `collection`; computed from its records when none is stored (a store
    /// written before digests were kept).
    func digest(of collection: String) throws -> StateDigest {
        try storedDigest(of: collection) ?? computedDigest(of: collection)
    }

    /// The stored digest of `collection`, nil when none is.
    func storedDigest(of collection: String) throws -> StateDigest? {
        try connection.text("SELECT value FROM sync_state WHERE key = ?", .text("digest:" + collection)).flatMap { StateDigest(hex: $0) }
    }

    /// Checks a `304`'s digest against the collection's; a store from before digests computes
    /// its digest once here and keeps it when it matches.
    func checkNotModified(_ digest: StateDigest, of collection: String) throws {
        if let stored = try storedDigest(of: collection) {
            try check(stored, digest, of: collection)
        } else {
            try check(try computedDigest(of: collection), digest, of: collection)
            try setDigest(digest, of: collection)
        }
    }

    /// Stores the digest of `collection` (inside the transaction that changed its records).
    func setDigest(_ digest: StateDigest, of collection: String) throws {
        try connection.statement("INSERT OR REPLACE INTO sync_state(key, value) VALUES (?, ?)").run(.text("digest:" + collection), .text(digest.hex))
    }

    /// The digest of the records `collection` holds, read from every one of them.
    func computedDigest(of collection: String) throws -> StateDigest {
        let statement = try connection.statement("SELECT body FROM records WHERE collection = ?")
        defer { statement.reset() }
        try statement.bind([.text(collection)])
        var digest = StateDigest.empty
        while try statement.step() { statement.withBytes(0) { digest.add(body: $0) } }
        return digest
    }

    /// The first collection whose records no longer sum to its stored digest, described; nil when all do.
    func digestProblem() throws -> String? {
        let names = try connection.statement("SELECT name FROM collections ORDER BY name")
        var collections: [String] = []
        while try names.step() { collections.append(names.string(0)) }
        names.reset()
        for name in collections {
            guard let stored = try storedDigest(of: name) else { continue }
            let computed = try computedDigest(of: name)
            if computed != stored {
                return "the records of \(name) do not match its state digest (stored \(stored.hex.prefix(16))…, records \(computed.hex.prefix(16))…)"
            }
        }
        return nil
    }

    /// Checks the digest an answer came with against what the collection now holds; a mismatch
    /// fails the answer (its transaction is rolled back and the collection reset).
    func check(_ digest: StateDigest, _ expected: StateDigest, of collection: String) throws {
        guard digest == expected else {
            throw ApplyFailure(
                .digestMismatch("\(collection) holds \(digest.hex.prefix(16))…, the server's state at the answer's token is \(expected.hex.prefix(16))…"))
        }
    }

    /// Upserts `record`, taking the version it replaces out of `digest` and adding its own.
    func upsert(_ record: Record, into collection: String, digest: inout StateDigest) throws {
        let old = try connection.statement("SELECT body FROM records WHERE collection = ? AND id = ?")
        try old.bind([.text(collection), .text(record.id)])
        if try old.step() { old.withBytes(0) { digest.remove(body: $0) } }
        old.reset()
        try upsert(record, into: collection)
        digest.add(body: record.body)
    }

    /// Removes record `id` (a hidden record is not kept: it is simply no longer visible), taking it
    /// out of `digest` when it was there.
    func remove(_ id: String, from collection: String, digest: inout StateDigest) throws {
        let statement = try connection.statement("DELETE FROM records WHERE collection = ? AND id = ? RETURNING body")
        defer { statement.reset() }
        try statement.bind([.text(collection), .text(id)])
        while try statement.step() { statement.withBytes(0) { digest.remove(body: $0) } }
    }
}

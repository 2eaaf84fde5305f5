import DeltaCore
import DeltaSQLite

extension ReplicaDatabase {
    /// A text value of the replica's state (`sync_state`), nil when unset.
    func syncText(_ key: String) throws -> String? {
        try connection.text("SELECT value FROM sync_state WHERE key = ?", .text(key))
    }

    /// Sets (or, with nil, removes) a text value of the replica's state. A value already held is
    /// not written again: opening a store on a full disk writes nothing.
    func setSyncText(_ key: String, _ value: String?) throws {
        guard try syncText(key) != value else { return }
        if let value {
            try connection.statement("INSERT OR REPLACE INTO sync_state(key, value) VALUES (?, ?)").run(.text(key), .text(value))
        } else {
            try connection.statement("DELETE FROM sync_state WHERE key = ?").run(.text(key))
        }
    }

    /// Notes that `collection`'s answers depend on the user (the server's rules restrict it):
    /// a sign-out returns it to the bundled snapshot. Noted before its rows are applied.
    func markPrivate(_ collection: String) throws {
        try setSyncText("private:" + collection, "1")
    }

    /// The collections noted as the user's (`markPrivate`).
    func privateCollections() throws -> [String] { try syncKeys(prefix: "private:") }

    /// The collections a sign-out returns to the bundled snapshot: those noted as the user's
    /// (`markPrivate`), and those whose stored token was issued to a user's read (its entity tag
    /// carries a user mark). Every answer to a user's read leaves that token, direct or through a
    /// granted cacheable read, in the transaction that applies its rows: a note that was never
    /// written (an older client, a path that missed it) does not keep the rows for the next user.
    func userCollections() throws -> [String] {
        var names = Set(try privateCollections())
        let statement = try connection.statement("SELECT name, etag FROM collections")
        defer { statement.reset() }
        while try statement.step() {
            if (try? Token(entityTag: statement.string(1)))?.selection?.user != nil { names.insert(statement.string(0)) }
        }
        return names.sorted()
    }

    /// The rest of every `sync_state` key that starts with `prefix`, in key order.
    func syncKeys(prefix: String) throws -> [String] {
        let statement = try connection.statement(
            "SELECT substr(key, length(?1) + 1) FROM sync_state WHERE substr(key, 1, length(?1)) = ?1 ORDER BY key")
        defer { statement.reset() }
        try statement.bind([.text(prefix)])
        var names: [String] = []
        while try statement.step() { names.append(statement.string(0)) }
        return names
    }

    /// The blobs the records held reference (a record with a malformed reference names none).
    func referencedBlobs() throws -> Set<BlobHash> {
        let statement = try connection.statement(#"SELECT id, body FROM records WHERE instr(body, '"$blob"') > 0"#)
        defer { statement.reset() }
        var found: Set<BlobHash> = []
        while try statement.step() {
            let record = Record(id: statement.string(0), hidden: false, canonicalBody: Array(statement.string(1).utf8))
            for reference in (try? record.blobReferences()) ?? [] { found.insert(reference.hash) }
        }
        return found
    }
}

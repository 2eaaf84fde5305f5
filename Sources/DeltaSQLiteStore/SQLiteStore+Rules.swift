public import DeltaCore
import DeltaRules
import DeltaSQLite
public import DeltaStore
import Foundation

extension SQLiteStore {
    /// Opens a read transaction for a user's read (see `ChangeReader.openRuleRead`); a read of
    /// changes alone (`openRuleChanges`) opens the same, since a SQLite transaction costs no round trip.
    public func openRuleRead(_ collection: CollectionName, since: Since, client: String?) async throws -> (start: RuleReadStart, lastMutation: UInt64?) {
        let connection = try await readers.checkout()
        do {
            let (verdict, last, historySince, head, rules) = try sqlite { () throws -> (ReadVerdict, UInt64?, UInt64, Token, UInt64) in
                try connection.statement("BEGIN").step()
                // A collection the rules name exists before anyone writes to it: empty, not missing.
                let verdict = try evaluate(connection, collection, since, wholeCollection: false, absentIsEmpty: true)
                // The history kept, the head and its tag, the rules version: one statement.
                let facts = try connection.statement(Self.ruleReadFacts)
                defer { facts.reset() }
                _ = try facts.step()
                let historySince = UInt64(clamping: facts.int64(0))
                let position = UInt64(clamping: facts.int64(1))
                guard position <= Token.maximumPosition else {
                    throw StoreError(.corrupt, "store \(path)", "the head is past the last position a token can name", evidence: "position \(position)")
                }
                let head = Token(database: databaseID, position: position, commit: UInt32(truncatingIfNeeded: facts.int64(2)))
                return (verdict, try lastMutation(connection, client), historySince, head, UInt64(clamping: facts.int64(3)))
            }
            let mode: FeedMode
            switch verdict {
            case .answer(.rejected(let rejection)):
                endRead(connection)
                return (.rejected(rejection), last)
            case .answer:
                mode = .delta(since: ReadVerdict.askedPosition(since))  // the collection did not change; its rule's sources may have
            case .stream(_, let streamMode, _):
                mode = streamMode
            }
            if case .delta(let position) = mode, position < historySince {
                endRead(connection)
                return (.rejected(.expired), last)
            }
            let source = SQLiteSelectionSource(connection: connection, collection: collection, token: head, mode: mode, store: self, rulesVersion: rules)
            return (.source(source, mode), last)
        } catch {
            readers.checkin(connection)
            throw error
        }
    }

    /// What a user's read needs besides the verdict: the oldest position whose history is kept,
    /// the head, its commit's tag, and the rules version.
    private static let ruleReadFacts = """
        SELECT coalesce((SELECT CAST(value AS INTEGER) FROM meta WHERE key = 'history_since'), 0),
               coalesce((SELECT max(position) FROM commits), 0),
               coalesce((SELECT tag FROM commits ORDER BY position DESC LIMIT 1), 0),
               coalesce((SELECT max(version) FROM rules), 0)
        """

    /// Records `rules` as the current rules unless they equal them, and makes the indexes their
    /// `$rows` sources are read by (`SQLiteStore+RowsKeys`); returns their version.
    public func installRules(_ rules: Rules) async throws -> UInt64 {
        let connection = try await writer.checkout()
        defer { writer.checkin(connection) }
        let now = Int64(Date().timeIntervalSince1970)
        return try sqlite {
            try syncKeyIndexes(connection, for: rules)
            return try connection.transaction(.immediate) { () throws -> UInt64 in
                let current = try connection.integer("SELECT coalesce(max(version), 0) FROM rules") ?? 0
                if current > 0, let digest = try connection.text("SELECT digest FROM rules WHERE version = ?", .integer(current)), digest == rules.digest {
                    return UInt64(current)
                }
                try connection.statement("INSERT INTO rules(version, digest, body, installed_at) VALUES (?, ?, ?, ?)")
                    .run(.integer(current + 1), .text(rules.digest), .blob(rules.canonical), .integer(now))
                return UInt64(current + 1)
            }
        }
    }

    /// The rules the database holds now.
    public func currentRules() async throws -> StoredRules? {
        let connection = try await readers.checkout()
        defer { readers.checkin(connection) }
        let found = try sqlite { () throws -> (Int64, [UInt8], Int64)? in
            let statement = try connection.statement("SELECT version, body, installed_at FROM rules ORDER BY version DESC LIMIT 1")
            defer { statement.reset() }
            guard try statement.step() else { return nil }
            return (statement.int64(0), statement.bytes(1), statement.int64(2))
        }
        guard let (version, body, installed) = found else { return nil }
        do {
            return StoredRules(
                version: UInt64(version), rules: try Rules(parsing: body), installedAt: Date(timeIntervalSince1970: TimeInterval(installed)), body: body)
        } catch {
            throw StoreError(.corrupt, "rules version \(version) in \(path)", "do not parse", evidence: "\(error)")
        }
    }

    /// The version of the rules the database holds now (see `ChangeReader.currentRulesVersion`).
    public func currentRulesVersion() async throws -> UInt64 {
        let connection = try await readers.checkout()
        defer { readers.checkin(connection) }
        return UInt64(clamping: try sqlite { try connection.integer("SELECT coalesce(max(version), 0) FROM rules") } ?? 0)
    }

    /// Reads the `$rows` sources of `rules` through the key indexes the database has for them
    /// (see `ChangeReader.followRules`): those another process made when it installed them.
    public func followRules(_ rules: Rules) async throws {
        let connection = try await readers.checkout()
        defer { readers.checkin(connection) }
        let present = try sqlite { () throws -> Set<String> in
            let statement = try connection.statement("SELECT name FROM sqlite_master WHERE type = 'index' AND name LIKE 'rules_key_%'")
            defer { statement.reset() }
            var names = Set<String>()
            while try statement.step() { names.insert(statement.string(0)) }
            return names
        }
        let followed = rules.keyIndexes.filter { present.contains($0.key) }.values.map { RowsKey.indexKey($0.collection, $0.member) }
        keyIndexes.withLock { $0 = Set(followed) }
    }

    /// The mutations pushes applied to `collection`, oldest first (see `StoreAdministration.mutationLog`).
    public func mutationLog(_ collection: CollectionName, id: String?, after: UInt64, limit: Int) async throws -> [LoggedMutation] {
        let connection = try await readers.checkout()
        defer { readers.checkin(connection) }
        return try sqlite {
            let statement = try connection.statement(
                """
                SELECT position, logged_at, id, user, client, mutation, operation FROM mutation_log
                WHERE collection = ?1 AND (?2 IS NULL OR id = ?2) AND position > ?3 ORDER BY position, rowid LIMIT ?4
                """)
            defer { statement.reset() }
            try statement.bind([.text(collection.rawValue), id.map { .text($0) } ?? .null, .integer(Int64(clamping: after)), .integer(Int64(limit))])
            var rows: [LoggedMutation] = []
            while try statement.step() {
                rows.append(
                    LoggedMutation(
                        position: UInt64(clamping: statement.int64(0)), time: statement.int64(1), collection: collection.rawValue, id: statement.string(2),
                        user: statement.isNull(3) ? nil : statement.string(3), client: statement.string(4), mutation: UInt64(clamping: statement.int64(5)),
                        operation: statement.string(6)))
            }
            return rows
        }
    }

    /// Offers `visit` each visible body of `collection` now (nil) or at `position`, in the open
    /// transaction on `connection`, one at a time (the bytes valid only during the call); with a
    /// `key` that has an index, only the bodies it may match.
    func forEachBody(
        _ connection: Connection, of collection: CollectionName, at position: UInt64?, key: RowsKey?, _ visit: (UnsafeRawBufferPointer) throws -> Void
    ) throws {
        if let key, let sql = keyedBodiesSQL(collection, key, at: position) {
            let statement = try connection.statement(sql)
            defer { statement.reset() }
            try statement.bind(position.map { [.text(key.value), .integer(Int64(clamping: $0))] } ?? [.text(key.value)])
            while try statement.step() { try statement.withBytes(0, visit) }
            return
        }
        let sql = "SELECT body FROM records WHERE collection = ?1 AND hidden = 0" + (position == nil ? "" : Self.versionsAtPosition(of: "?1"))
        let statement = try connection.statement(sql)
        defer { statement.reset() }
        try statement.bind(position.map { [.text(collection.rawValue), .integer(Int64(clamping: $0))] } ?? [.text(collection.rawValue)])
        while try statement.step() { try statement.withBytes(0, visit) }
    }
}

public import DeltaCore
public import DeltaRules
public import DeltaStore
import Foundation
import NIOConcurrencyHelpers
import PostgresNIO

extension PostgresStore {
    /// Opens a REPEATABLE READ transaction for a user's read (see `ChangeReader.openRuleRead`).
    public func openRuleRead(_ collection: CollectionName, since: Since, client: String?) async throws -> (start: RuleReadStart, lastMutation: UInt64?) {
        try await openRuleRead(collection, since: since, client: client, changesAlone: false)
    }

    /// A user's read of changes alone (see `ChangeReader.openRuleChanges`): a delta first runs its
    /// opening statement without a transaction. That statement is one snapshot (a STABLE
    /// function's statements all see the calling query's), and when it holds every changed record
    /// (at most `PostgresReadOpening.readAhead`) it is the whole read, which saves `BEGIN` and
    /// `COMMIT` (0.04 ms of a 0.9 ms user delta, docs/decisions/2026-11-27-postgres-requests-on-event-loops.md).
    /// When it does not, the read begins again in a transaction.
    public func openRuleChanges(_ collection: CollectionName, since: Since, client: String?) async throws -> (start: RuleReadStart, lastMutation: UInt64?) {
        try await openRuleRead(collection, since: since, client: client, changesAlone: true)
    }

    private func openRuleRead(_ collection: CollectionName, since: Since, client: String?, changesAlone: Bool) async throws
        -> (start: RuleReadStart, lastMutation: UInt64?)
    {
        let connection = try await checkoutReader()
        var transaction = !changesAlone || ReadVerdict.askedPosition(since) == 0
        do {
            if transaction { try await beginRead(connection) }
            // A collection the rules name exists before anyone writes to it: empty, not missing.
            var opening = try await PostgresReadOpening.read(self, connection, collection, since: since, client: client, absentIsEmpty: true)
            var mode = Self.mode(of: opening, since: since)
            if !transaction, let first = mode, opening.changed(for: first) == nil {
                transaction = true
                try await beginRead(connection)
                opening = try await PostgresReadOpening.read(self, connection, collection, since: since, client: client, absentIsEmpty: true)
                mode = Self.mode(of: opening, since: since)
            }
            let last = opening.lastMutation
            guard let mode else {
                await endRead(connection, transaction: transaction)
                if case .answer(.rejected(let rejection)) = opening.verdict { return (.rejected(rejection), last) }
                return (.rejected(.expired), last)
            }
            let source = PostgresSelectionSource(
                connection: connection, collection: collection, token: opening.head, store: self, mode: mode, changed: opening.changed(for: mode),
                rulesVersion: opening.rulesVersion, transaction: transaction)
            return (.source(source, mode), last)
        } catch {
            await release(connection, to: readers, failed: true)
            throw failure(error)
        }
    }

    /// The feed mode of a user's read that `opening` began, nil when it is rejected (by the
    /// verdict, or as `expired`: a delta from before the history kept).
    private static func mode(of opening: PostgresReadOpening, since: Since) -> FeedMode? {
        let mode: FeedMode
        switch opening.verdict {
        case .answer(.rejected): return nil
        case .answer: mode = .delta(since: ReadVerdict.askedPosition(since))  // the collection did not change; its rule's sources may have
        case .stream(_, let streamMode, _): mode = streamMode
        }
        if case .delta(let position) = mode, position < opening.historySince { return nil }
        return mode
    }

    /// Records `rules` as the current rules unless they equal them, and makes the indexes their
    /// `$rows` sources are read by (`PostgresStore+RowsKeys`); returns their version.
    public func installRules(_ rules: Rules) async throws -> UInt64 {
        try await withWriter { connection in
            try await syncKeyIndexes(connection, for: rules)
            var current: (Int64, String)?
            for try await row in try await query(connection, "SELECT version, digest FROM deltasnap.rules ORDER BY version DESC LIMIT 1") {
                current = try row.decode((Int64, String).self)
            }
            if let current, current.1 == rules.digest { return UInt64(current.0) }
            let version = (current?.0 ?? 0) + 1
            var binds = PostgresBindings(capacity: 4)
            binds.append(version)
            binds.append(rules.digest)
            binds.append(ByteBuffer(bytes: rules.canonical))
            binds.append(Int64(Date().timeIntervalSince1970))
            for try await _ in try await query(connection, "INSERT INTO deltasnap.rules(version, digest, body, installed_at) VALUES ($1, $2, $3, $4)", binds) {}
            return UInt64(version)
        }
    }

    /// The rules the database holds now.
    public func currentRules() async throws -> StoredRules? {
        let found = try await withWriter { connection -> (Int64, [UInt8], Int64)? in
            var found: (Int64, [UInt8], Int64)?
            for try await row in try await query(connection, "SELECT version, body, installed_at FROM deltasnap.rules ORDER BY version DESC LIMIT 1") {
                let (version, body, installed) = try row.decode((Int64, ByteBuffer, Int64).self)
                found = (version, Array(buffer: body), installed)
            }
            return found
        }
        guard let (version, body, installed) = found else { return nil }
        do {
            return StoredRules(
                version: UInt64(version), rules: try Rules(parsing: body), installedAt: Date(timeIntervalSince1970: TimeInterval(installed)), body: body)
        } catch {
            throw StoreError(.corrupt, "rules version \(version) in \(location)", "do not parse", evidence: "\(error)")
        }
    }

    /// The version of the rules the database holds now (see `ChangeReader.currentRulesVersion`), on
    /// a reader: asked twice a second by every server that follows the database's rules.
    public func currentRulesVersion() async throws -> UInt64 {
        try await withReader { connection -> UInt64 in
            var version: Int64 = 0
            for try await row in try await query(connection, "SELECT coalesce(max(version), 0) FROM deltasnap.rules") { version = try row.decode(Int64.self) }
            return UInt64(clamping: version)
        }
    }

    /// Reads the `$rows` sources of `rules` through the key indexes the database has for them
    /// (see `ChangeReader.followRules`): those another process made when it installed them.
    public func followRules(_ rules: Rules) async throws {
        let present = try await withReader { connection -> Set<String> in
            var names = Set<String>()
            let existing = "SELECT indexname FROM pg_indexes WHERE schemaname = 'deltasnap' AND indexname LIKE 'rules\\_key\\_%'"
            for try await row in try await query(connection, existing) { names.insert(try row.decode(String.self)) }
            return names
        }
        let followed = rules.keyIndexes.filter { present.contains($0.key) }.values.map { RowsKey.indexKey($0.collection, $0.member) }
        keyIndexes.withLockedValue { $0 = Set(followed) }
    }

    /// The mutations pushes applied to `collection`, oldest first (see `StoreAdministration.mutationLog`).
    public func mutationLog(_ collection: CollectionName, id: String?, after: UInt64, limit: Int) async throws -> [LoggedMutation] {
        try await withWriter { connection in
            var binds = PostgresBindings(capacity: 4)
            binds.append(collection.rawValue)
            binds.append(id)
            binds.append(Int64(clamping: after))
            binds.append(Int64(limit))
            let sql = """
                SELECT position, logged_at, id, "user", client, mutation, operation FROM deltasnap.mutation_log
                WHERE collection = $1 AND ($2::text IS NULL OR id = $2) AND position > $3 ORDER BY position, ctid LIMIT $4
                """
            var rows: [LoggedMutation] = []
            for try await row in try await query(connection, sql, binds) {
                let (position, time, id, user, client, mutation, operation) = try row.decode((Int64, Int64, String, String?, String, Int64, String).self)
                rows.append(
                    LoggedMutation(
                        position: UInt64(clamping: position), time: time, collection: collection.rawValue, id: id, user: user, client: client,
                        mutation: UInt64(clamping: mutation), operation: operation))
            }
            return rows
        }
    }
}

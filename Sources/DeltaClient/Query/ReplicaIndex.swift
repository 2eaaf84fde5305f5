import DeltaCore
import DeltaSQLite
import Foundation

/// Indexes on chosen members of a collection (`ReplicaConfiguration.indexes`), so that a `query`
/// whose filter has `eq` or `in` on one of them reads only the rows that can match.
///
/// Each is an SQLite expression index on `(collection, json_extract(body, '$."member"'))`. The
/// index only narrows the rows read; every row is still checked by the filter itself, so an
/// indexed query answers exactly what an unindexed one does.
///
/// Before SQLite 3.45, `json_extract` ends a string at an escaped NUL, so a key is then a prefix
/// of its value (`Connection.jsonTruncatesAtNUL`). A prefix sorts just before its value and after
/// every smaller one, so the paths stay exact with three allowances: no lookup or bound by a
/// string holding NUL (`sqlValue`, `IndexedRange`), no equality decided by SQL alone
/// (`IndexedEquality.exact`), and equal text keys read on as ties by the ordered walk
/// (`IndexedOrder`). `ReplicaQueryTests` holds this on records with NUL in their strings.
enum ReplicaIndex {
    /// The SQL expression a member's index is built on, and that queries must repeat verbatim.
    static func expression(_ member: String) throws -> String {
        guard !member.isEmpty, member.utf8.count <= 256,
            member.unicodeScalars.allSatisfy({ $0.value >= 0x20 && $0 != "\"" && $0 != "'" && $0 != "\\" })
        else {
            throw ReplicaError(
                .configuration, "an indexed member must be 1 to 256 characters without quotes, backslashes or control characters",
                evidence: String(reflecting: member))
        }
        return "json_extract(body, '$.\"\(member)\"')"
    }

    /// The index's name: stable for a (collection, member) pair.
    static func name(_ collection: String, _ member: String) -> String {
        let digest = SHA256.hash(Array("\(collection)\u{0}\(member)".utf8)).prefix(8).map { String(format: "%02x", $0) }.joined()
        return "member_\(digest)"
    }

    /// Creates the configured indexes and drops those no longer configured (on the writer connection).
    static func apply(_ indexes: [String: [String]], on connection: Connection) throws {
        var wanted: [String: String] = [:]
        for (collection, members) in indexes {
            _ = try CollectionName(collection)
            for member in members {
                wanted[name(collection, member)] = "CREATE INDEX IF NOT EXISTS \(name(collection, member)) ON records(collection, \(try expression(member)))"
            }
        }
        let existing = try names(connection)
        try connection.transaction(.immediate) {
            for old in existing where wanted[old] == nil { try connection.execute("DROP INDEX IF EXISTS \(old)") }
            for (index, sql) in wanted.sorted(by: { $0.key < $1.key }) where !existing.contains(index) { try connection.execute(sql) }
        }
    }

    /// A compound index's name: stable for a collection and its list of members.
    static func name(_ collection: String, _ members: [String]) -> String {
        let digest = SHA256.hash(Array(([collection] + members).joined(separator: "\u{0}").utf8)).prefix(8).map { String(format: "%02x", $0) }.joined()
        return "members_\(digest)"
    }

    /// Creates the configured compound indexes (`ReplicaConfiguration.compoundIndexes`), each on
    /// `(collection, member₁, member₂, …)`, and drops the compound indexes no longer configured.
    static func apply(compound: [String: [[String]]], on connection: Connection) throws {
        var wanted: [String: String] = [:]
        for (collection, lists) in compound {
            _ = try CollectionName(collection)
            for members in lists {
                guard members.count == 2, members[0] != members[1] else {
                    throw ReplicaError(
                        .configuration, "a compound index names two different members: one the filter requires a value of, one to order by",
                        evidence: "\(collection): \(members)")
                }
                let expressions = try members.map(expression).joined(separator: ", ")
                wanted[name(collection, members)] = "CREATE INDEX IF NOT EXISTS \(name(collection, members)) ON records(collection, \(expressions))"
            }
        }
        let existing = try names(connection, prefix: "members")
        try connection.transaction(.immediate) {
            for old in existing where wanted[old] == nil { try connection.execute("DROP INDEX IF EXISTS \(old)") }
            for (index, sql) in wanted.sorted(by: { $0.key < $1.key }) where !existing.contains(index) { try connection.execute(sql) }
        }
    }

    /// The member indexes (`prefix` "member") or compound indexes ("members") in the store.
    static func names(_ connection: Connection, prefix: String = "member") throws -> Set<String> {
        let statement = try connection.statement("SELECT name FROM sqlite_schema WHERE type = 'index' AND name LIKE '\(prefix)\\_%' ESCAPE '\\'")
        defer { statement.reset() }
        var found = Set<String>()
        while try statement.step() { found.insert(statement.string(0)) }
        return found
    }

    /// The SQLite value an indexed `json_extract` gives for `value`, when an index lookup by it
    /// cannot miss a match: strings, booleans (1 and 0), and integers SQLite holds exactly. Not a
    /// string holding NUL where SQLite's JSON ends strings there (`Connection.jsonTruncatesAtNUL`):
    /// its index key would be a prefix of it.
    static func sqlValue(_ value: JSONValue) -> SQLValue? {
        switch value {
        case .string(let text):
            guard !(Connection.jsonTruncatesAtNUL && text.utf8.contains(0)) else { return nil }
            return .text(text)
        case .bool(let flag): return .integer(flag ? 1 : 0)
        case .number(let text):
            guard let integer = Int64(text) else { return nil }
            return .integer(integer)
        case .null, .array, .object: return nil
        }
    }

    /// `json_type`'s name for the values' kind when they are all strings ("text") or all
    /// integers SQLite holds exactly ("integer"); nil otherwise.
    static func soleKind(_ values: [JSONValue]) -> String? {
        if values.allSatisfy({ if case .string = $0 { true } else { false } }) { return "text" }
        if values.allSatisfy({ if case .number(let text) = $0 { Int64(text) != nil } else { false } }) { return "integer" }
        return nil
    }
}

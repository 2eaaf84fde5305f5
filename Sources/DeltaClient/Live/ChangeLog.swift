import DeltaSQLite
import Foundation

/// The rows a writer connection changed, recorded by SQLite itself: temporary triggers on every
/// table a live query reads (`records`, the outbox's `overlay` and `conflicts`) note the
/// collection and id of each row inserted, updated or deleted, inside the transaction that wrote
/// it. A rolled-back transaction takes its notes with it. After each of its transactions the
/// writer takes the notes (`drain`) and wakes the live queries of exactly those collections, with
/// exactly those ids, so a new write path cannot forget to: there is no call to forget.
///
/// Each transaction that writes one of those rows also counts itself in the store file
/// (`sync_state`'s `commits`), once, whichever process wrote it, and notes the count it made
/// (`ownCommits`): a live query that patches its result reads the count in the same state as the
/// rows, and so knows whether a commit it was not told of (another process's) came between
/// (`ChangeHub.quietMark`).
///
/// A collection's ids are noted up to `ChangedRows.limit` writes; past them only that it changed
/// (a reset writes a million rows: the notes stay a few rows, and the live queries read anew).
/// The triggers cost each written row a few lookups in tables of a few rows: measured in
/// docs/BENCHMARKS.md, "The replica: queries in SQL, readers, observation".
enum ChangeLog {
    /// The key in the store's `sync_state` of the count of commits that wrote rows live queries read.
    static let commitsKey = "commits"

    /// Creates the notes tables and the triggers on `tables` (qualified: `main.records`; each has
    /// `collection` and `id` columns), on this connection only (temporary triggers are the
    /// connection's own); `counter` is the store file's `sync_state` as this connection names
    /// it (`main.sync_state`, or `store.sync_state` where the store is attached). It sets the
    /// connection's `afterBegin`: each transaction counts itself once.
    static func install(on connection: Connection, tables: [String], counter: String) throws {
        // `written` counts a collection's writes up to one past the limit; ids are noted while it
        // is within it, so a collection at limit + 1 has lost some and reads as `unknown`. Past
        // that, the trigger's `WHEN` costs each row one lookup, as noting the collection alone did.
        var sql = """
            CREATE TEMP TABLE IF NOT EXISTS changed_collections(collection TEXT PRIMARY KEY, written INTEGER NOT NULL) WITHOUT ROWID;
            CREATE TEMP TABLE IF NOT EXISTS changed_rows(collection TEXT NOT NULL, id TEXT NOT NULL, PRIMARY KEY (collection, id)) WITHOUT ROWID;
            CREATE TEMP TABLE IF NOT EXISTS commit_counted(counted INTEGER NOT NULL);
            INSERT INTO commit_counted SELECT 0 WHERE NOT EXISTS (SELECT 1 FROM commit_counted);
            CREATE TEMP TABLE IF NOT EXISTS own_commits(count INTEGER PRIMARY KEY);
            """
        // The count: it starts at a random number in each store file (a store rebuilt, or
        // replaced, does not count again through numbers a live query knew from the file before),
        // and is moved by the first row a transaction writes (`commit_counted`, reset at each
        // BEGIN, and at each `ownCommits` for writes outside `transaction`), without a conflict
        // clause (the writing statement's own would override it).
        // A trigger's writes name tables unqualified (SQLite's rule), found in the order temp,
        // main, attached: `counter` must be the first `sync_state` in that order.
        let parts = counter.split(separator: ".", maxSplits: 1).map(String.init)
        guard parts.count == 2, parts[1] == "sync_state" else {
            throw SQLiteError(code: 1, message: "ChangeLog: the counter must be a schema's sync_state: \(counter)")
        }
        if parts[0] != "main", try connection.integer("SELECT count(*) FROM main.sqlite_master WHERE name = 'sync_state'") != 0 {
            throw SQLiteError(code: 1, message: "ChangeLog: main.sync_state would be written instead of \(counter)")
        }
        let key = "'\(commitsKey)'"
        let count = """
            UPDATE commit_counted SET counted = 1;
            UPDATE sync_state SET value = value + 1 WHERE key = \(key);
            INSERT INTO sync_state(key, value) SELECT \(key), (random() >> 21) & 0x3ffffffffff WHERE NOT EXISTS (SELECT 1 FROM \(counter) WHERE key = \(key));
            INSERT INTO own_commits SELECT value FROM \(counter) WHERE key = \(key);
            """
        // `WHERE NOT EXISTS`, not `OR IGNORE`: a statement's own conflict clause (an upsert, `OR
        // REPLACE`) overrides its triggers', and `OR IGNORE` would then fail the write.
        for table in tables {
            let name = table.replacingOccurrences(of: ".", with: "_")
            for (event, row) in [("INSERT", "new"), ("UPDATE", "new"), ("DELETE", "old")] {
                sql += """
                    CREATE TEMP TRIGGER IF NOT EXISTS changed_\(name)_\(event.lowercased()) AFTER \(event) ON \(table)
                    WHEN coalesce((SELECT written FROM changed_collections WHERE collection = \(row).collection), 0) <= \(ChangedRows.limit)
                    BEGIN
                        INSERT INTO changed_collections SELECT \(row).collection, 0
                            WHERE NOT EXISTS (SELECT 1 FROM changed_collections WHERE collection = \(row).collection);
                        INSERT INTO changed_rows SELECT \(row).collection, \(row).id
                            WHERE (SELECT written FROM changed_collections WHERE collection = \(row).collection) < \(ChangedRows.limit)
                            AND NOT EXISTS (SELECT 1 FROM changed_rows WHERE collection = \(row).collection AND id = \(row).id);
                        UPDATE changed_collections SET written = written + 1 WHERE collection = \(row).collection;
                    END;
                    CREATE TEMP TRIGGER IF NOT EXISTS counted_\(name)_\(event.lowercased()) AFTER \(event) ON \(table)
                    WHEN (SELECT counted FROM temp.commit_counted) = 0
                    BEGIN
                        \(count)
                    END;
                    """
            }
        }
        try connection.execute(sql)
        connection.afterBegin = "UPDATE temp.commit_counted SET counted = 0"
    }

    /// The counts of the commits this connection made since the last call (see `install`), in
    /// order, forgotten as they are returned. Call it outside any transaction.
    static func ownCommits(_ connection: Connection) throws -> [Int64] {
        let statement = try connection.statement("SELECT count FROM temp.own_commits ORDER BY count")
        var counts: [Int64] = []
        while try statement.step() { counts.append(statement.int64(0)) }
        statement.reset()
        try connection.execute("DELETE FROM temp.own_commits; UPDATE temp.commit_counted SET counted = 0")
        return counts
    }

    /// The store's count of commits (see `install`), as `connection` sees it now (in its
    /// transaction, when one is open); 0 before the first.
    static func commits(_ connection: Connection, counter: String = "main.sync_state") throws -> Int64 {
        try connection.integer("SELECT value FROM \(counter) WHERE key = '\(commitsKey)'") ?? 0
    }

    /// The rows changed since the last call, forgotten as they are returned. Call it outside any
    /// transaction, after the writes' commit (or rollback).
    static func drain(_ connection: Connection) throws -> ChangedRows {
        let collections = try connection.statement("SELECT collection, written FROM temp.changed_collections")
        var changed: [String: ChangedRows.Rows] = [:]
        while try collections.step() {
            changed[collections.string(0)] = collections.int64(1) > ChangedRows.limit ? .unknown : .ids([])
        }
        collections.reset()
        guard !changed.isEmpty else { return .nothing }
        let rows = try connection.statement("SELECT collection, id FROM temp.changed_rows")
        while try rows.step() {
            guard case .ids(var ids) = changed[rows.string(0)] else { continue }
            let id = rows.string(1)
            // Swift's strings compare canonically ("é" precomposed equals "e" and U+0301, U+212A
            // equals "K") where the store compares bytes: such ids are not kept one by one.
            guard id.utf8.allSatisfy({ $0 < 0x80 }) else {
                changed[rows.string(0)] = .unknown
                continue
            }
            ids.insert(id)
            changed[rows.string(0)] = .ids(ids)
        }
        rows.reset()
        try connection.execute("DELETE FROM temp.changed_collections; DELETE FROM temp.changed_rows")
        return ChangedRows(collections: changed)
    }
}

import DeltaSQLite
import Foundation

/// The rows a writer connection changed, recorded by SQLite itself: temporary triggers on every
/// table a live query reads (`records`, the outbox's `overlay` and `conflicts`) note the
/// collection and id of each row inserted, updated or deleted, inside the transaction that wrote
/// it. A rolled-back transaction takes its notes with it. After each of its transactions the
/// writer takes the notes (`drain`) and wakes the live queries of exactly those collections, with
/// exactly those ids, so a new write path cannot forget to: there is no call to forget.
///
/// Each transaction that writes one of those rows also counts itself in its file (`CommitCount`).
///
/// A collection's ids are noted up to `ChangedRows.limit` writes; past them only that it changed
/// (a reset writes a million rows: the notes stay a few rows, and the live queries read anew).
/// The triggers cost each written row a few lookups in tables of a few rows: measured in
/// docs/BENCHMARKS.md, "The replica: queries in SQL, readers, observation".
enum ChangeLog {
    /// Creates the notes tables and the triggers on `tables` (qualified: `main.records`; each has
    /// `collection` and `id` columns), on this connection only (temporary triggers are the
    /// connection's own), and `CommitCount`'s; `store` is the schema that is the store file on
    /// this connection (`main`, or `store` where the store is attached), the others' tables are
    /// the outbox's.
    static func install(on connection: Connection, tables: [String], store: String) throws {
        try CommitCount.install(on: connection, tables: tables, store: store)
        // `written` counts a collection's writes up to one past the limit; ids are noted while it
        // is within it, so a collection at limit + 1 has lost some and reads as `unknown`. Past
        // that, the trigger's `WHEN` costs each row one lookup, as noting the collection alone did.
        var sql = """
            CREATE TEMP TABLE IF NOT EXISTS changed_collections(collection TEXT PRIMARY KEY, written INTEGER NOT NULL) WITHOUT ROWID;
            CREATE TEMP TABLE IF NOT EXISTS changed_rows(collection TEXT NOT NULL, id TEXT NOT NULL, PRIMARY KEY (collection, id)) WITHOUT ROWID;
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
                    """
            }
        }
        try connection.execute(sql)
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
        // Cached statements: `execute` would prepare them again after every write.
        try connection.statement("DELETE FROM temp.changed_collections").run()
        try connection.statement("DELETE FROM temp.changed_rows").run()
        return ChangedRows(collections: changed)
    }
}

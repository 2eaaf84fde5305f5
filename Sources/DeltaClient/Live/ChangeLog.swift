import DeltaSQLite
import Foundation

/// The collections a writer connection changed, recorded by SQLite itself: temporary triggers
/// on every table a live query reads (`records`, the outbox's `overlay` and `conflicts`) note
/// the collection of each row inserted, updated or deleted, inside the transaction that wrote
/// it. A rolled-back transaction takes its notes with it. After each of its transactions the
/// writer takes the notes (`drain`) and wakes the live queries of exactly those collections,
/// so a new write path cannot forget to: there is no call to forget.
///
/// The triggers cost each written row one lookup in a table of a few rows: measured in
/// docs/BENCHMARKS.md, "The replica: queries in SQL, readers, observation".
enum ChangeLog {
    /// Creates the notes table and the triggers on `tables` (qualified: `main.records`), on this
    /// connection only (temporary triggers are the connection's own).
    static func install(on connection: Connection, tables: [String]) throws {
        var sql = "CREATE TEMP TABLE IF NOT EXISTS changed_collections(collection TEXT PRIMARY KEY) WITHOUT ROWID;"
        // `WHERE NOT EXISTS`, not `OR IGNORE`: a statement's own conflict clause (an upsert, `OR
        // REPLACE`) overrides its triggers', and `OR IGNORE` would then fail the write.
        for table in tables {
            let name = table.replacingOccurrences(of: ".", with: "_")
            for (event, row) in [("INSERT", "new"), ("UPDATE", "new"), ("DELETE", "old")] {
                sql += """
                    CREATE TEMP TRIGGER IF NOT EXISTS changed_\(name)_\(event.lowercased()) AFTER \(event) ON \(table)
                    BEGIN INSERT INTO changed_collections SELECT \(row).collection
                        WHERE NOT EXISTS (SELECT 1 FROM changed_collections WHERE collection = \(row).collection); END;
                    """
            }
        }
        try connection.execute(sql)
    }

    /// The collections changed since the last call, forgotten as they are returned. Call it
    /// outside any transaction, after the writes' commit (or rollback).
    static func drain(_ connection: Connection) throws -> Set<String> {
        let statement = try connection.statement("SELECT collection FROM temp.changed_collections")
        var changed: Set<String> = []
        while try statement.step() { changed.insert(statement.string(0)) }
        statement.reset()
        if !changed.isEmpty { try connection.execute("DELETE FROM temp.changed_collections") }
        return changed
    }
}

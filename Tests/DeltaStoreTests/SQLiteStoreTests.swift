import DeltaCore
import DeltaSQLite
import DeltaSQLiteStore
import DeltaStore
import DeltaTestSupport
import Foundation
import Testing

@Suite("SQLite backend specifics")
struct SQLiteStoreTests {
    @Test("Reopening keeps the records and the identity")
    func reopen() async throws {
        try await Backend.sqlite.withStore { store, directory in
            let path = directory.appendingPathComponent("store.sqlite").path
            let token = try await put(store, "widgets", #"{"id":"a"}"#).token
            let again = try SQLiteStore(path: path)
            #expect(again.databaseID == store.databaseID)
            let rows = try await again.read(name("widgets"), since: .nothing).rows()
            #expect(rows.token == token && rows.rows.count == 1)
            try await again.close()
        }
    }

    @Test("The write-ahead log is checkpointed off the writer's path and stays bounded")
    func checkpointsInTheBackground() async throws {
        try await Backend.sqlite.withStore { store, directory in
            let wal = directory.appendingPathComponent("store.sqlite-wal").path
            let filler = String(repeating: "x", count: 1_500)
            // 12 commits of about 500 pages each: without checkpoints the log would pass 24 MB.
            for commit in 0..<12 {
                let records = try (0..<1_000).map { try record(#"{"id":"r\#(commit)-\#($0)","text":"\#(filler)"}"#) }
                _ = try await store.write(to: name("widgets")) { transaction in
                    for record in records { try await transaction.upsert(record) }
                }
                // Give the checkpoint a moment, as the gaps between real commits do.
                try await Task.sleep(for: .milliseconds(100))
            }
            let bytes = try #require(try FileManager.default.attributesOfItem(atPath: wal)[.size] as? Int)
            #expect(bytes < 12 << 20, "the log grew to \(bytes) bytes: no checkpoint ran")
        }
    }

    @Test("A store closed right after a large commit checkpoints it first, though another process keeps the file open")
    func checkpointsBeforeClosing() async throws {
        let directory = try makeTemporaryDirectory("checkpoint-close")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/store.sqlite"
        try await SQLiteStore(path: path).close()
        // The server, say: its connection stops the closing store from checkpointing as the last one.
        let server = try Connection(path: path)
        _ = try server.integer("SELECT count(*) FROM records")
        let before = try #require(try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int)
        let store = try SQLiteStore(path: path)
        let filler = String(repeating: "x", count: 1_500)
        let records = try (0..<3_000).map { try record(#"{"id":"r\#($0)","text":"\#(filler)"}"#) }
        _ = try await store.write(to: name("widgets")) { transaction in
            for record in records { try await transaction.upsert(record) }
        }
        try await store.close()
        let after = try #require(try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int)
        #expect(after > before + 4 << 20, "the database file grew from \(before) to \(after) bytes: the commit stayed in the log")
        withExtendedLifetime(server) {}
    }

    @Test("A restored backup rejects tokens from the history it lost, and old tokens of the same history still work")
    func restoredBackup() async throws {
        try await Backend.sqlite.withStore { store, directory in
            let path = directory.appendingPathComponent("store.sqlite").path
            let kept = try await put(store, "widgets", #"{"id":"a"}"#).token
            let backup = directory.appendingPathComponent("backup.sqlite").path
            let connection = try Connection(path: path)
            try connection.execute("VACUUM INTO '\(backup)'")
            let lost = try await put(store, "widgets", #"{"id":"b"}"#).token
            // The backup is restored and takes a different write at the same position.
            let restored = try SQLiteStore(path: backup)
            #expect(restored.databaseID == store.databaseID)
            try await put(restored, "widgets", #"{"id":"c"}"#)
            guard case .rejected(.unknownCommit) = try await restored.read(name("widgets"), since: .token(lost)) else {
                Issue.record("a token from the lost history was honoured")
                return
            }
            let delta = try await restored.read(name("widgets"), since: .token(kept)).rows()
            #expect(delta.rows.map(\.id) == ["c"])
            try await restored.close()
        }
    }

    @Test("Tokens older than the horizon are rejected as expired")
    func expired() async throws {
        try await Backend.sqlite.withStore { store, directory in
            let old = try await put(store, "widgets", #"{"id":"a"}"#).token
            try await put(store, "widgets", #"{"id":"b"}"#)
            let connection = try Connection(path: directory.appendingPathComponent("store.sqlite").path)
            try connection.execute("INSERT INTO meta(key, value) VALUES ('horizon', '2')")
            guard case .rejected(.expired) = try await store.read(name("widgets"), since: .token(old)) else {
                Issue.record("a token older than the horizon was honoured")
                return
            }
        }
    }

    @Test("A tampered database with impossible positions gives a corrupt-store error, not a crash", arguments: ["300000000000", "-5"])
    func impossiblePositions(position: String) async throws {
        try await Backend.sqlite.withStore { store, directory in
            try await put(store, "widgets", #"{"id":"a"}"#)
            let connection = try Connection(path: directory.appendingPathComponent("store.sqlite").path)
            try connection.execute("UPDATE records SET position = \(position)")
            do {
                _ = try await store.read(name("widgets"), since: .nothing)
                Issue.record("read a tampered database")
            } catch let error as StoreError {
                #expect(error.kind == .corrupt, "\(error)")
            }
        }
    }

    @Test("A file that is not a database is refused with a clear error")
    func notADatabase() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("junk-\(UUID().uuidString)").path
        try Data(repeating: 0x41, count: 4096).write(to: URL(fileURLWithPath: path))
        defer { try? FileManager.default.removeItem(atPath: path) }
        do {
            _ = try SQLiteStore(path: path)
            Issue.record("opened junk")
        } catch let error as StoreError {
            #expect(error.kind == .unavailable)
            #expect(error.description.hasPrefix("store \(path): cannot open the database (SQLite: file is not a database"))
        }
    }
}

@Suite("Commit tags")
struct CommitTagTests {
    private func replay(_ backend: Backend, id: UInt64, _ writes: [String]) async throws -> [Token] {
        let directory = URL(fileURLWithPath: try makeTemporaryDirectory("tags"))
        defer { try? FileManager.default.removeItem(at: directory) }
        let database = try await backend.makeDatabase(in: directory)
        let store = try await database.open(newDatabaseID: id)
        var tokens: [Token] = []
        for write in writes { tokens.append(try await put(store, "widgets", write).token) }
        _ = try await store.write(to: name("widgets")) { transaction in
            try await transaction.upsert(try record(#"{"id":"z"}"#))
            try await transaction.hideUnwritten()
        }
        tokens.append(
            try await store.headPosition() == 4
                ? try await store.read(name("widgets"), since: .nothing).rows().token : Token(database: 0, position: 0, commit: 0))
        try await store.close()
        await database.remove()
        return tokens
    }

    @Test("The same writes on the same identity give the same tokens; a different write forks the chain for good", arguments: Backend.available)
    func chain(backend: Backend) async throws {
        let writes = [#"{"id":"a"}"#, #"{"id":"b","v":1}"#, #"{"id":"c"}"#]
        let first = try await replay(backend, id: 0xABCD, writes)
        let second = try await replay(backend, id: 0xABCD, writes)
        #expect(first == second)
        #expect(first.map(\.position) == [1, 2, 3, 4])
        let forked = try await replay(backend, id: 0xABCD, [writes[0], #"{"id":"b","v":2}"#, writes[2]])
        #expect(forked[0] == first[0])
        #expect(forked[1].commit != first[1].commit && forked[2].commit != first[2].commit)
    }

    @Test(
        "Both backends chain the same tags: the same writes give the same tokens on SQLite and PostgreSQL",
        .enabled(if: Backend.available.contains(.postgres)))
    func sameOnBothBackends() async throws {
        let writes = [#"{"id":"a","n":[1,2]}"#, #"{"id":"b","hidden":true}"#, #"{"id":"c","s":"é"}"#]
        let sqlite = try await replay(.sqlite, id: 0x1234, writes)
        let postgres = try await replay(.postgres, id: 0x1234, writes)
        #expect(sqlite == postgres)
    }
}

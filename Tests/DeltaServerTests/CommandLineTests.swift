import DeltaCore
import DeltaSQLite
import DeltaStore
import DeltaTestSupport
import Foundation
import HTTPTypes
import HummingbirdTesting
import Testing

/// Starts `deltasnap serve` on a free port with the test secret.
func startServer(db: String) async throws -> (ChildProcess, Int) {
    try await startServer(db: db, environment: ["DELTASNAP_WRITE_TOKEN": secret])
}

@Suite("deltasnap as a real process")
struct CommandLineTests {
    let directory: String

    init() throws {
        directory = try makeTemporaryDirectory("deltasnap-cli")
    }

    @Test("import loads NDJSON or a JSON array as one commit and says what it did; bad input exits non-zero and writes nothing")
    func importCommand() async throws {
        let db = "\(directory)/import.sqlite"
        let file = "\(directory)/records.ndjson"
        try (0..<1_000).map { #"{"id":"r\#($0)","n":\#($0)}"# }.joined(separator: "\n").write(toFile: file, atomically: true, encoding: .utf8)
        let first = try ChildProcess(try deltasnapExecutable(), ["import", "--db", db, "--collection", "items", file])
        #expect(await first.stop(0, timeout: .seconds(60)) == 0)
        #expect(first.printed == "imported 1000 records into items: 1000 upserted, 0 hidden, 0 unchanged; committed position 1\n")
        let again = try ChildProcess(try deltasnapExecutable(), ["import", "--db", db, "--collection", "items", file])
        #expect(await again.stop(0, timeout: .seconds(60)) == 0)
        #expect(again.printed == "imported 1000 records into items: 0 upserted, 0 hidden, 1000 unchanged; nothing changed, no commit\n")

        try #"[{"id":"x"},{"id":"x"}]"#.write(toFile: file, atomically: true, encoding: .utf8)
        let duplicate = try ChildProcess(try deltasnapExecutable(), ["import", "--db", db, "--collection", "items", file])
        #expect(await duplicate.stop(0, timeout: .seconds(60)) != 0)
        #expect(duplicate.printed.contains(#"record "x" in items: written twice in one commit"#))
        let missing = try ChildProcess(try deltasnapExecutable(), ["import", "--db", db, "--collection", "items", "\(directory)/nope.json"])
        #expect(await missing.stop(0, timeout: .seconds(60)) != 0)
        #expect(missing.printed.contains("nope.json: cannot open for reading"))
        let badName = try ChildProcess(try deltasnapExecutable(), ["import", "--db", db, "--collection", "../etc", file])
        #expect(await badName.stop(0, timeout: .seconds(60)) != 0)
        #expect(badName.printed.contains("--collection: collection name: only A-Z, a-z, 0-9, '_' and '-' are allowed"))
        let connection = try Connection(path: db)
        #expect(try connection.integer("SELECT count(*) FROM records") == 1_000)
    }

    @Test("serve binds to loopback by default, announces its port, and stops cleanly on SIGTERM")
    func serveLifecycle() async throws {
        let (server, port) = try await startServer(db: "\(directory)/serve.sqlite")
        try await TestClient.withClient(host: "127.0.0.1", port: port) { client in
            let health = try await client.send("/healthz", .get)
            #expect(health.status == 200)
        }
        let status = await server.stop(SIGTERM)
        #expect(status == 0, "serve exited with wait status \(status): \(server.printed)")
        #expect(server.printed.contains("deltasnap: serving \(directory)/serve.sqlite on http://127.0.0.1:\(port) (writes enabled)"))
    }

    @Test("Every write the server acknowledged survives SIGKILL of the server", arguments: Backend.available)
    func acknowledgedWritesSurviveKill(backend: Backend) async throws {
        let database = try await backend.makeDatabase(in: URL(fileURLWithPath: directory))
        defer { Task { await database.remove() } }
        let db = database.location
        let seed = SeededGenerator.seed(for: "CommandLineTests.acknowledgedWritesSurviveKill(\(backend))")
        var random = SeededGenerator(seed: seed)
        var acknowledged: [String: String] = [:]
        let rounds = Int(ProcessInfo.processInfo.environment["DELTASNAP_KILL_ROUNDS"] ?? "") ?? 5
        for round in 0..<rounds {
            let (server, port) = try await startServer(db: db)
            let killAfter = Int(random.next() % 250) + 20
            // The kill is timed from the fifth acknowledged write, so a loaded machine that is slow
            // to start the server still gets writes in flight when it dies.
            let (started, startedSignal) = AsyncStream.makeStream(of: Void.self)
            let acked: [String: String] = try await withThrowingTaskGroup(of: [String: String].self) { group in
                group.addTask {
                    defer { startedSignal.finish() }
                    return try await TestClient.withClient(host: "127.0.0.1", port: port) { client in
                        var acked: [String: String] = [:]
                        for index in 0..<10_000 {
                            let id = "r\(round)-\(index)"
                            let body = #"{"id":"\#(id)","round":\#(round)}"#
                            guard
                                let reply = try? await client.send(
                                    "/api/items/\(id)", .put, headers: [.authorization: "Bearer \(secret)", .contentType: "application/json"], body: body),
                                reply.status == 200
                            else { return acked }
                            acked[id] = body
                            if acked.count == 5 { startedSignal.yield() }
                        }
                        return acked
                    }
                }
                for await _ in started { break }
                try await Task.sleep(for: .milliseconds(killAfter))
                await server.stop(SIGKILL)
                var all: [String: String] = [:]
                for try await part in group { all.merge(part) { $1 } }
                return all
            }
            acknowledged.merge(acked) { $1 }
        }
        if backend == .sqlite {
            let connection = try Connection(path: db)
            #expect(try connection.integrityProblems().isEmpty, "seed \(seed)")
        }
        let store = try await database.open()
        var stored: [String: String] = [:]
        guard case .changes(let feed) = try await store.read(try CollectionName("items"), since: .nothing) else {
            throw TestFailure("seed \(seed): no records after the kills")
        }
        while let batch = try await feed.next(maximumBytes: 1 << 16) {
            try batch.forEach { body, _ in
                guard case .string(let id) = try JSONValue(parsing: body)["id"] else { throw TestFailure("a record without an id") }
                stored[id] = String(decoding: body, as: UTF8.self)
            }
        }
        feed.close()
        try await store.close()
        for (id, body) in acknowledged {
            #expect(stored[id] == body, "seed \(seed): lost \(id)")
        }
        #expect(acknowledged.count > 20, "seed \(seed): too few writes were acknowledged to mean anything")
        print(
            "acknowledgedWritesSurviveKill(\(backend)): seed \(seed): \(rounds) SIGKILLs of deltasnap serve during writes, \(acknowledged.count) acknowledged writes checked"
        )
    }
}

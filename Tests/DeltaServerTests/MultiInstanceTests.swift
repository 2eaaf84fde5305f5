import DeltaCore
import DeltaTestSupport
import Foundation
import HTTPTypes
import HummingbirdTesting
import Testing

@Suite("Several servers on one PostgreSQL database", .enabled(if: Backend.available.contains(.postgres)))
struct MultiInstanceTests {
    @Test("Three serve processes, writers and syncing clients on random instances: every answer exact, every client converges")
    func threeServers() async throws {
        let seed = SeededGenerator.seed(for: "MultiInstanceTests.threeServers")
        let directory = try makeTemporaryDirectory("deltasnap-multi")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let database = try await Backend.postgres.makeDatabase(in: URL(fileURLWithPath: directory))
        var servers: [ChildProcess] = []
        var ports: [Int] = []
        do {
            for _ in 0..<3 {
                let (server, port) = try await startServer(db: database.location)
                servers.append(server)
                ports.append(port)
            }
            let instances = ports
            let log = CommitLog()
            let seeded = try await getOnce(port: instances[0], "/api/items")
            #expect(seeded.status == 404)
            let first = try await TestClient.withClient(host: "127.0.0.1", port: instances[1]) {
                try await $0.send(
                    "/api/items/r0", .put, headers: [.authorization: "Bearer \(secret)", .contentType: "application/json"], body: #"{"id":"r0","v":0}"#)
            }
            #expect(first.status == 200, "\(first.text)")
            await log.record(position: 1, changes: [("r0", false, #"{"id":"r0","v":0}"#)])
            try await withThrowingTaskGroup(of: Void.self) { group in
                for writer in 0..<3 {
                    group.addTask { try await ConvergenceTests.write(ports: instances, seed: seed &+ UInt64(writer), log: log) }
                }
                for reader in 0..<4 {
                    group.addTask { try await ConvergenceTests.read(ports: instances, seed: seed &+ 100 &+ UInt64(reader), log: log, final: false) }
                }
                try await group.waitForAll()
            }
            for reader in 0..<4 {
                try await ConvergenceTests.read(ports: instances, seed: seed &+ 200 &+ UInt64(reader), log: log, final: true)
            }
            // Quiet now: every instance gives the same full answer, with the same validators.
            var answers: [String] = []
            for port in instances {
                let reply = try await getOnce(port: port, "/api/items")
                answers.append("\(reply.header("ETag") ?? "") \(reply.header("Last-Modified") ?? "") \(reply.text)")
            }
            #expect(Set(answers).count == 1, "seed \(seed): the instances disagree")
            print("MultiInstanceTests.threeServers: seed \(seed): \(await log.commits.count) commits across 3 servers, every answer checked")
        } catch {
            for server in servers { await server.stop(SIGKILL) }
            await database.remove()
            throw error
        }
        for server in servers { #expect(await server.stop(SIGTERM) == 0, "a server did not stop cleanly: \(server.printed)") }
        await database.remove()
    }
}

import DeltaCore
import DeltaServer
import DeltaStore
import DeltaTestSupport
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOCore
import NIOPosix
import Testing

@Suite("Convergence under concurrent writes")
struct ConvergenceTests {
    static let ids = (0..<30).map { "r\($0)" }

    @Test("Concurrent writers and syncing readers: every delta is exact, every reader ends equal to the server", arguments: Backend.available)
    func randomized(backend: Backend) async throws {
        let seed = SeededGenerator.seed(for: "ConvergenceTests.randomized(\(backend))")
        try await withServer(.loopback, backend: backend) { client, _ in
            let port = try #require(client.port)
            let log = CommitLog()
            // Seed one commit so that every reader has something to start from.
            _ = try await client.write(.put, "/api/items/r0", #"{"id":"r0","v":0}"#)
            await log.record(position: 1, changes: [("r0", false, #"{"id":"r0","v":0}"#)])
            try await withThrowingTaskGroup(of: Void.self) { group in
                for writer in 0..<3 {
                    group.addTask { try await Self.write(ports: [port], seed: seed &+ UInt64(writer), log: log) }
                }
                for reader in 0..<4 {
                    group.addTask { try await Self.read(ports: [port], seed: seed &+ 100 &+ UInt64(reader), log: log, final: false) }
                }
                try await group.waitForAll()
            }
            // Quiet now: every reader, old or new, ends equal to the server.
            for reader in 0..<4 {
                try await Self.read(ports: [port], seed: seed &+ 200 &+ UInt64(reader), log: log, final: true)
            }
            print(
                "ConvergenceTests.randomized: seed \(seed): \(await log.commits.count) commits by 3 writers, 4 readers syncing meanwhile, every delta checked against the acknowledged log"
            )
        }
    }

    /// Commits 60 random batches, each on one of `ports` at random, and logs what was acknowledged.
    static func write(ports: [Int], seed: UInt64, log: CommitLog) async throws {
        try await withClients(ports) { clients in
            var random = SeededGenerator(seed: seed)
            for step in 0..<60 {
                let count = Int(random.next() % 4) + 1
                var items: [(id: String, hidden: Bool, body: String)] = []
                var seen = Set<String>()
                for _ in 0..<count {
                    let id = ids[Int(random.next() % UInt64(ids.count))]
                    guard seen.insert(id).inserted else { continue }
                    let hidden = random.next() % 4 == 0
                    let body = #"{"id":"\#(id)","v":\#(random.next() % 5)}"#
                    items.append((id, hidden, body))
                }
                let json = "[" + items.map { $0.hidden ? "{\"hidden\":true," + $0.body.dropFirst() : $0.body }.joined(separator: ",") + "]"
                let response = try await clients[Int(random.next() % UInt64(clients.count))].send(
                    "/api/items", .post, headers: [.authorization: "Bearer \(secret)", .contentType: "application/json"], body: json)
                guard response.status == 200 else { throw TestFailure("seed \(seed) step \(step): write failed \(response.status)") }
                let summary = try JSONValue(parsing: response.bytes)
                if summary["committed"] == .bool(true), case .number(let position) = summary["position"] {
                    await log.record(position: UInt64(position)!, changes: items)
                }
            }
        }
    }

    /// Syncs one replica several times at random moments, each time from one of `ports` at
    /// random, and checks every answer against the log.
    static func read(ports: [Int], seed: UInt64, log: CommitLog, final: Bool) async throws {
        try await withClients(ports) { clients in
            var random = SeededGenerator(seed: seed)
            var replica = ModelReplica()
            for round in 0..<(final ? 2 : 25) {
                if !final { try await Task.sleep(for: .milliseconds(Int(random.next() % 15))) }
                var headers: HTTPFields = [:]
                let useDate = random.next() % 3 == 0
                if let etag = replica.etag, !useDate { headers[.ifNoneMatch] = etag }
                if let date = replica.lastModified, useDate { headers[.ifModifiedSince] = date }
                if random.next() % 2 == 0 { headers[.acceptEncoding] = "gzip" }
                let response = try await clients[Int(random.next() % UInt64(clients.count))].send("/api/items", .get, headers: headers).decoded()
                let sent = useDate ? replica.lastModified : replica.etag
                let base = replica.lastModified.flatMap { try? Token.position(lastModified: $0) } ?? 0
                let changedIDs = try Self.ids(in: response)
                guard try replica.apply(response, sentETag: sent) else { throw TestFailure("seed \(seed) round \(round): unexpected reset") }
                let position = try Token.position(lastModified: replica.lastModified ?? "")
                try await log.waitForCommits(through: position)
                let expected = await log.state(at: position)
                #expect(replica.records == expected, "seed \(seed) round \(round): replica differs from the server state at position \(position)")
                #expect(
                    response.header("Delta-Digest") == ModelReplica.digest(of: expected),
                    "seed \(seed) round \(round): Delta-Digest is not the digest of the state at \(position)")
                if response.header("Delta-Mode") == "delta" {
                    let mustCarry = await log.changed(after: base, through: position)
                    #expect(Set(changedIDs) == mustCarry, "seed \(seed) round \(round): delta from \(base) to \(position) missed or repeated a change")
                    #expect(changedIDs.count == Set(changedIDs).count, "seed \(seed) round \(round): a record appears twice in one delta")
                }
                if final, round == 1 {
                    #expect(response.status == 304, "seed \(seed): a second sync with nothing changed must be 304")
                }
            }
        }
    }

    /// Runs `body` with one keep-alive connection to each of `ports`.
    static func withClients(_ ports: [Int], _ body: ([InstanceConnection]) async throws -> Void) async throws {
        let clients = ports.map { InstanceConnection(port: $0) }
        do {
            try await body(clients)
        } catch {
            for client in clients { await client.close() }
            throw error
        }
        for client in clients { await client.close() }
    }

    static func ids(in response: HTTPReply) throws -> [String] {
        guard response.status == 200 else { return [] }
        guard case .object(let members) = try JSONValue(parsing: response.bytes), case .array(let items) = members.first?.value else {
            return []
        }
        return items.compactMap { if case .string(let id) = $0["id"] { id } else { nil } }
    }
}

/// One keep-alive connection to a server, opened again when it has not been used for a while.
///
/// The server closes a connection idle for 60 s (`ServerConfiguration.idleTimeout`), and the test
/// client does not reconnect. A reader that picks one of three instances at random, on a loaded
/// machine where a round takes seconds, can leave one of its connections idle that long: its next
/// request then failed with "I/O on closed channel". Used by one task at a time.
final class InstanceConnection {
    /// How long a connection may sit unused before the next request opens a new one.
    static let fresh: Duration = .seconds(20)
    let port: Int
    private var client: TestClient?
    private var used = ContinuousClock.now

    init(port: Int) { self.port = port }

    /// Runs one request, on the open connection if it was used within `fresh`, else on a new one.
    func send(_ uri: String, _ method: HTTPRequest.Method, headers: HTTPFields = [:], body: String? = nil) async throws -> HTTPReply {
        if let client, ContinuousClock.now - used > Self.fresh {
            try? await client.shutdown()
            self.client = nil
        }
        let client = self.client ?? TestClient(host: "127.0.0.1", port: port)
        if self.client == nil {
            client.connect()
            self.client = client
        }
        defer { used = .now }
        return try await client.send(uri, method, headers: headers, body: body)
    }

    /// Closes the connection, if one is open.
    func close() async {
        try? await client?.shutdown()
        client = nil
    }
}

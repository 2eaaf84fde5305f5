import DeltaCore
import DeltaServer
import DeltaTestSupport
import Foundation
import HTTPTypes
import HummingbirdTesting
import Testing

@Suite("Users, randomized, through a real Varnish with granted cacheable reads: no row outside a rule, ever")
struct UserGrantConvergenceTests {
    /// Users two by two in the same teams at first, so that grants are shared; the random writes
    /// then move memberships, rows and sharing lists under them.
    static let users = UserConvergenceTests.users + ["u0", "u1", "u2", "u3"].map { $0 + "b" }

    @Test("Writers move memberships, rows and sharing entries; eight users sync through Varnish after every round", arguments: Backend.available)
    func randomized(backend: Backend) async throws {
        let seed = SeededGenerator.seed(for: "UserGrantConvergenceTests.randomized(\(backend))")
        // No answer memory: every granted read Varnish asks for is computed from its URL alone,
        // as another instance on the database would (ReadGrantTests covers the kept answers).
        try await withUserServer(backend: backend, rules: UserRulesTests.rules, grantLifetime: 3600, configure: { $0.answerCacheBytes = 0 }) { origin, _ in
            let directory = try makeTemporaryDirectory("varnish-users")
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let (varnish, port) = try await BlobCacheTests.startVarnish(upstream: try #require(origin.port), directory: directory)
            defer { Task { await varnish.stop(SIGKILL) } }
            for (index, user) in Self.users.enumerated() {
                _ = try await origin.write(.put, "/api/members/x\(index)", #"{"id":"x\#(index)","team":"t\#(index % 4)","user":"\#(user)"}"#)
            }
            _ = try await origin.write(.put, "/api/posts/p0", #"{"id":"p0","n":0,"team":"t0"}"#)
            _ = try await origin.write(.put, "/api/docs/d0", #"{"editors":[],"id":"d0","n":0,"owner":"u1"}"#)
            var minted: [String: String] = [:]
            for user in Self.users { minted[user] = try await Mint.hs256(user) }
            let tokens = minted
            let (redirected, hits, checked) = try await TestClient.withClient(host: "127.0.0.1", port: port) { client -> (Int, Int, Int) in
                var random = SeededGenerator(seed: seed)
                var replicas: [String: ModelReplica] = [:]
                var (redirected, hits, checked) = (0, 0, 0)
                for round in 0..<25 {
                    for _ in 0..<Int.random(in: 1...3, using: &random) { try await UserConvergenceTests.write(&random, origin) }
                    let reference = ReferenceRules(state: try await UserConvergenceTests.state(origin))
                    for user in Self.users {
                        for path in ["/api/posts", "/api/docs", "/api/members", "/api/posts?limit=2"] {
                            var replica = replicas["\(user)\(path)"] ?? ModelReplica()
                            let (first, answer) = try await ReadGrantTests.sync(client, tokens[user]!, &replica, path: path)
                            if let answer {
                                redirected += 1
                                // Varnish names the request and, on a hit, the one that stored the answer.
                                if (answer.header("X-Varnish") ?? "").split(separator: " ").count == 2 { hits += 1 }
                            }
                            let collection = String(path.dropFirst(5).prefix { $0 != "?" })
                            let all = reference.visible(collection, to: user).mapValues { String(decoding: $0.canonicalBytes, as: UTF8.self) }
                            var expected = all
                            if path.hasSuffix("limit=2") {
                                let firstTwo = expected.keys.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }.prefix(2)
                                expected = expected.filter { firstTwo.contains($0.key) }
                            }
                            let received = try Self.outside(answer ?? first, all)
                            #expect(received.isEmpty, "seed \(seed) round \(round): \(user) received rows outside the rule in \(path)")
                            #expect(replica.records == expected, "seed \(seed) round \(round): \(user)'s \(path)")
                            #expect(replica.resets == 0, "seed \(seed) round \(round): \(user)'s \(path) reset")
                            replicas["\(user)\(path)"] = replica
                            checked += 1
                        }
                    }
                }
                return (redirected, hits, checked)
            }
            #expect(redirected > 0 && hits > 0, "seed \(seed): \(redirected) reads went through a grant, \(hits) of them served by Varnish")
            print("UserGrantConvergenceTests: seed \(seed), \(checked) reads checked on \(backend), \(redirected) through grants, \(hits) served by Varnish")
            await varnish.stop(SIGKILL)
        }
    }

    /// The ids of the visible records in a `200` that are not exactly as `allowed` has them.
    static func outside(_ reply: HTTPReply, _ allowed: [String: String]) throws -> [String] {
        guard reply.status == 200 else { return [] }
        guard case .object(let members) = try JSONValue(parsing: reply.bytes), case .array(let items) = members.first?.value else { return ["?"] }
        return try items.compactMap { item in
            let record = try Record(value: item)
            guard !record.hidden else { return nil }
            return allowed[record.id] == String(decoding: record.body, as: UTF8.self) ? nil : record.id
        }
    }
}

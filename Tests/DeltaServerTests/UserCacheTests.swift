import DeltaCore
import DeltaTestSupport
import Foundation
import HTTPTypes
import HummingbirdTesting
import Testing

@Suite("Users behind a real caching proxy (nginx proxy_cache): nothing of theirs stored, no row outside a rule")
struct UserCacheTests {
    @Test("Two users sync through nginx while memberships and sharing lists change: every answer a MISS, each equal to the rules", arguments: Backend.available)
    func proxied(backend: Backend) async throws {
        let nginx = try requireProgram("nginx", package: "nginx-light")
        try await withUserServer(backend: backend, rules: UserRulesTests.rules) { origin, _ in
            let directory = try makeTemporaryDirectory("nginx")
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let (proxy, port) = try await CachingProxyTests.startNginx(nginx, directory: directory, upstream: try #require(origin.port))
            defer { Task { await proxy.stop(SIGKILL) } }

            _ = try await origin.write(.post, "/api/posts", #"[{"id":"p1","team":"red"},{"id":"p2","team":"blue"},{"id":"p3","team":"red"}]"#)
            _ = try await origin.write(.post, "/api/members", #"[{"id":"m1","team":"red","user":"ada"},{"id":"m2","team":"blue","user":"bob"}]"#)
            _ = try await origin.write(.post, "/api/docs", #"[{"editors":[],"id":"d1","owner":"ada"}]"#)
            let tokens = ["ada": try await Mint.hs256("ada"), "bob": try await Mint.hs256("bob")]
            try await TestClient.withClient(host: "127.0.0.1", port: port) { client in
                var random = SeededGenerator(seed: 21)
                var replicas: [String: ModelReplica] = [:]
                for round in 0..<10 {
                    let reference = ReferenceRules(state: try await UserConvergenceTests.state(origin))
                    for user in ["ada", "bob"] {
                        for collection in ["posts", "docs"] {
                            var replica = replicas["\(user)/\(collection)"] ?? ModelReplica()
                            var headers: HTTPFields = [.authorization: "Bearer \(tokens[user]!)"]
                            if let etag = replica.etag { headers[.ifNoneMatch] = etag }
                            let reply = try await client.send("/api/\(collection)", .get, headers: headers)
                            #expect(reply.header("X-Cache-Status") == "MISS", "round \(round): nginx served \(user) a stored answer")
                            #expect(reply.status == 304 || reply.header("Cache-Control") == "private, no-store")
                            #expect(try replica.apply(reply, sentETag: replica.etag), "round \(round)")
                            let expected = reference.visible(collection, to: user).mapValues { String(decoding: $0.canonicalBytes, as: UTF8.self) }
                            #expect(replica.records == expected, "round \(round): \(user)'s \(collection) through nginx")
                            replicas["\(user)/\(collection)"] = replica
                        }
                    }
                    // Move a membership or share the document, at random.
                    let user = Bool.random(using: &random) ? "ada" : "bob"
                    let team = ["red", "blue"].randomElement(using: &random)!
                    if Bool.random(using: &random) {
                        _ = try await origin.write(.put, "/api/members/m\(round % 3)", #"{"id":"m\#(round % 3)","team":"\#(team)","user":"\#(user)"}"#)
                    } else {
                        _ = try await origin.write(.put, "/api/docs/d1", #"{"editors":["\#(user)"],"id":"d1","owner":"ada","r":\#(round)}"#)
                    }
                }
            }
            await proxy.stop(SIGKILL)
        }
    }
}

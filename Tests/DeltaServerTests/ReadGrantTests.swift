import DeltaCore
import DeltaRules
import DeltaServer
import DeltaStore
import DeltaTestSupport
import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
import Testing

@Suite("Users' cacheable reads: one signed, expiring URL per set of rows, shared through a real Varnish")
struct ReadGrantTests {
    static let computed = #"deltasnap_cacheable_answers_total{source="database"}"#
    static let kept = #"deltasnap_cacheable_answers_total{source="memory"}"#

    /// A user's entity tag without its user mark: the token a granted answer's `Delta-Base` names.
    static func neutral(_ etag: String?) -> String? {
        guard let etag else { return nil }
        let fields = etag.dropFirst(3).dropLast().split(separator: ".", omittingEmptySubsequences: false)
        return "W/\"" + fields.prefix(7).joined(separator: ".") + "\""
    }

    /// One sync of `user`'s replica of posts through `client` (Varnish): the conditional read
    /// with `Delta-Redirect`, then the `307`'s `Location` without any credential.
    static func sync(
        _ client: TestClient, _ token: String, _ replica: inout ModelReplica, path: String = "/api/posts"
    ) async throws -> (first: HTTPReply, answer: HTTPReply?) {
        var headers: HTTPFields = [.authorization: "Bearer \(token)", HTTPField.Name("Delta-Redirect")!: "1"]
        if let etag = replica.etag { headers[.ifNoneMatch] = etag }
        let first = try await client.send(path, .get, headers: headers)
        guard first.status == 307, let location = first.header("Location") else {
            _ = try replica.apply(first, sentETag: replica.etag)
            return (first, nil)
        }
        #expect(first.header("Cache-Control") == "private, no-store")
        let answer = try await client.send("/api/" + location, .get)
        #expect(answer.status == 200, "\(location): \(answer.text.prefix(200))")
        #expect(answer.header("Cache-Control") == "public, immutable" && answer.header("Expires") != nil)
        if answer.header("Delta-Mode") == "delta" { #expect(first.header("Delta-Base") == answer.header("Delta-Base") && answer.header("Delta-Base") != nil) }
        _ = try replica.apply(answer, sentETag: neutral(replica.etag))
        #expect(answer.header("ETag") == neutral(first.header("ETag")), "the 307 names the user's token for the answer it points to")
        replica.etag = first.header("ETag")
        replica.lastModified = first.header("Last-Modified")
        return (first, answer)
    }

    @Test(
        "100 users of one team through Varnish: one URL and one computation per change, each with their own token; a revoke is answered directly",
        arguments: Backend.available)
    func sharedThroughVarnish(backend: Backend) async throws {
        try await withUserServer(backend: backend, rules: exampleRules, grantLifetime: 3600) { origin, _ in
            let directory = try makeTemporaryDirectory("varnish-grants")
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let (varnish, port) = try await BlobCacheTests.startVarnish(upstream: try #require(origin.port), directory: directory)
            defer { Task { await varnish.stop(SIGKILL) } }
            let users = (0..<100).map { "u\($0)" }
            let members = users.enumerated().map { #"{"id":"m\#($0.offset)","team":"\#($0.offset == 99 ? "blue" : "red")","user":"\#($0.element)"}"# }
            _ = try await origin.write(.post, "/api/members", "[" + members.joined(separator: ",") + "]")
            _ = try await origin.write(.post, "/api/posts", #"[{"id":"p1","team":"red"},{"id":"p2","team":"red"},{"id":"p3","team":"blue"}]"#)
            var minted: [String: String] = [:]
            for user in users { minted[user] = try await Mint.hs256(user) }
            let tokens = minted

            try await TestClient.withClient(host: "127.0.0.1", port: port) { client in
                var replicas = [String: ModelReplica](uniqueKeysWithValues: users.map { ($0, ModelReplica()) })
                for round in 0..<3 {
                    if round > 0 {
                        _ = try await origin.write(.put, "/api/posts/p\(round + 3)", #"{"id":"p\#(round + 3)","team":"red","round":\#(round)}"#)
                        _ = try await origin.write(.put, "/api/posts/p3", #"{"id":"p3","team":"blue","round":\#(round)}"#)
                    }
                    let (before, keptBefore) = (try await origin.metric(Self.computed), try await origin.metric(Self.kept))
                    let reference = ReferenceRules(state: try await UserConvergenceTests.state(origin))
                    var locations: [String: Set<String>] = [:]
                    for user in users {
                        let (first, answer) = try await Self.sync(client, tokens[user]!, &replicas[user]!)
                        #expect(answer != nil, "round \(round): \(user) got \(first.status), not a 307")
                        let team = user == "u99" ? "blue" : "red"
                        locations[team, default: []].insert(try #require(first.header("Location")))
                        let expected = reference.visible("posts", to: user).mapValues { String(decoding: $0.canonicalBytes, as: UTF8.self) }
                        #expect(replicas[user]!.records == expected, "round \(round): \(user)'s posts")
                    }
                    // One URL per set of rows; two when the round straddles the start of a new
                    // lifetime (the expiry is rounded to whole lifetimes), differing only there.
                    let urls = (locations["red"] ?? []).count + (locations["blue"] ?? []).count
                    for team in ["red", "blue"] {
                        let found = locations[team] ?? []
                        let unexpiring = Set(
                            found.map {
                                $0.replacingOccurrences(of: #"grant=(\d+)\.\d+\.([^.&]*)\.[^&]*"#, with: "grant=$1.E.$2.S", options: .regularExpression)
                            })
                        #expect(!found.isEmpty && found.count <= 2 && unexpiring.count == 1, "round \(round): \(team): one URL per set of rows: \(found)")
                    }
                    #expect(locations["red"]?.isDisjoint(with: locations["blue"] ?? []) == true)
                    #expect(try await origin.metric(Self.computed) - before == urls, "round \(round): the origin computed more than one answer per URL")
                    #expect(
                        try await origin.metric(Self.kept) - keptBefore == urls,
                        "round \(round): Varnish sent more than the first read of each URL to the origin")
                    #expect(Set(users.map { replicas[$0]!.etag }).count == 100, "every user holds their own token")
                }
                // A revoke: u5 leaves red for blue. Their next read is answered directly, exactly.
                _ = try await origin.write(.put, "/api/members/m5", #"{"id":"m5","team":"blue","user":"u5"}"#)
                let (moved, _) = try await Self.sync(client, tokens["u5"]!, &replicas["u5"]!)
                #expect(moved.status == 200 && moved.header("Cache-Control") == "private, no-store")
                let reference = ReferenceRules(state: try await UserConvergenceTests.state(origin))
                let expected = reference.visible("posts", to: "u5").mapValues { String(decoding: $0.canonicalBytes, as: UTF8.self) }
                #expect(replicas["u5"]!.records == expected && expected.keys.sorted() == ["p3"])
                // The others' rows did not change: a 304 with their own token, no redirect.
                let (same, _) = try await Self.sync(client, tokens["u6"]!, &replicas["u6"]!)
                #expect(same.status == 304)
            }
            await varnish.stop(SIGKILL)
        }
    }

    /// Base64url `text` with the last character's lowest bit flipped: when that bit encodes no byte
    /// (the length is not a multiple of 4), the same bytes spelled another way.
    static func respelled(_ text: String) -> String {
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
        guard let last = text.last, let index = alphabet.firstIndex(of: last) else { return text }
        return String(text.dropLast()) + String(alphabet[index ^ 1])
    }

    @Test(
        "A grant is the server's own, for one read, until it expires: changed in any part, respelled, reused elsewhere or late, it is 403",
        arguments: Backend.available)
    func tamperedAndExpired(backend: Backend) async throws {
        try await withUserServer(backend: backend, rules: exampleRules, grantLifetime: 3) { origin, _ in
            _ = try await origin.write(.post, "/api/members", #"[{"id":"m1","team":"red","user":"ada"},{"id":"m2","team":"blue","user":"bob"}]"#)
            _ = try await origin.write(.post, "/api/posts", #"[{"id":"p1","team":"red"},{"id":"p2","team":"blue"}]"#)
            let ada = try await Mint.hs256("ada")
            // A grant lives 4 to 6 s here: a machine that stalls longer between the two reads sees
            // it expire (and only that), so it asks for another, ten times at most (a fresh clone's
            // full run, every suite at once on two cores, once stalled three times in a row).
            var location = ""
            for attempt in 1...10 {
                let first = try await origin.get("/api/posts", as: ada, [HTTPField.Name("Delta-Redirect")!: "1"])
                #expect(first.status == .temporaryRedirect)
                location = try #require(first.headers[.location])
                let good = try await origin.get("/api/" + location, as: nil)
                if good.status == .ok {
                    #expect(String(buffer: good.body) == #"{"posts":[{"id":"p1","team":"red"}]}"#)
                    break
                }
                #expect(good.status == .forbidden && String(buffer: good.body).contains("grant-expired") && attempt < 10, "\(String(buffer: good.body))")
            }
            let grant = try #require(
                location.split(whereSeparator: { $0 == "&" || $0 == "?" }).first { $0.hasPrefix("grant=") }.map { String($0.dropFirst(6)) })
            let parts = grant.split(separator: ".").map(String.init)
            try #require(parts.count == 4)
            // Rows and signature each end in a character with unused bits (else respelling them changes their bytes).
            #expect(parts[2].utf8.count % 4 != 0 && parts[3].utf8.count % 4 != 0, "\(parts)")
            // The rows part names red: swap it for blue's, keep the signature.
            let blue = Data(#"{"team":{"in":["blue"]}}"#.utf8).base64EncodedString().replacingOccurrences(of: "=", with: "")
                .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            let forged = [
                location.replacingOccurrences(of: parts[2], with: blue),
                location.replacingOccurrences(of: "grant=\(parts[0])", with: "grant=\(parts[0])0"),
                location.replacingOccurrences(of: "." + parts[3], with: "." + String(parts[3].reversed())),
                location.replacingOccurrences(of: "&until=", with: "&limit=1&until="),
                location.replacingOccurrences(of: "posts?", with: "notes?"),
                // The same bytes in base64url with other unused bits: one answer has one URL.
                location.replacingOccurrences(of: "." + parts[2] + ".", with: "." + Self.respelled(parts[2]) + "."),
                location.replacingOccurrences(of: "." + parts[3], with: "." + Self.respelled(parts[3])),
            ]
            for target in forged {
                let reply = try await origin.get("/api/" + target, as: nil)
                #expect(reply.status == .forbidden, "\(target)")
                #expect(String(buffer: reply.body).contains("grant-invalid"), "\(target): \(String(buffer: reply.body))")
            }
            try await Task.sleep(for: .seconds(6.2))
            let late = try await origin.get("/api/" + location, as: nil)
            #expect(late.status == .forbidden && String(buffer: late.body).contains("grant-expired"), "\(String(buffer: late.body))")
        }
    }

    @Test("A granted read that cannot be computed as signed (rows moved on, other rules) sends the client back to its own read", arguments: Backend.available)
    func askAgain(backend: Backend) async throws {
        try await withUserServer(backend: backend, rules: exampleRules, grantLifetime: 3600, configure: { $0.answerCacheBytes = 0 }) { origin, store in
            _ = try await origin.write(.post, "/api/members", #"[{"id":"m1","team":"red","user":"ada"}]"#)
            _ = try await origin.write(.post, "/api/posts", #"[{"id":"p1","team":"red"}]"#)
            let ada = try await Mint.hs256("ada")
            let redirect: HTTPFields = [HTTPField.Name("Delta-Redirect")!: "1"]
            let first = try await origin.get("/api/posts?limit=5", as: ada, redirect)
            let location = try #require(first.headers[.location])
            #expect(try await origin.get("/api/" + location, as: nil).status == .ok)
            // Any commit to a collection the rule reads (members) moves the newest commit past the URL's until.
            _ = try await origin.write(.put, "/api/members/m2", #"{"id":"m2","team":"blue","user":"bob"}"#)
            let moved = try await origin.get("/api/" + location, as: nil)
            #expect(moved.status == .temporaryRedirect && moved.headers[.location] == "posts?limit=5", "\(moved.headers)")
            let second = try await origin.get("/api/posts?limit=5", as: ada, redirect)
            let fresh = try #require(second.headers[.location])
            #expect(fresh != location)
            let freshAnswer = try await origin.get("/api/" + fresh, as: nil)
            #expect(freshAnswer.status == .ok)
            _ = try await store.installRules(try Rules(parsing: Array(exampleRules.replacingOccurrences(of: "airports", with: "ports").utf8)))
            let stale = try await origin.get("/api/" + fresh, as: nil)
            #expect(stale.status == .temporaryRedirect && stale.headers[.location] == "posts?limit=5")
        }
    }
}

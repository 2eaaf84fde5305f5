import DeltaCore
import DeltaRules
import DeltaServer
import DeltaStore
import DeltaTestSupport
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOCore
import Testing

@Suite("Users' reads under rules: each user's rows, exact grants and revokes, tokens bound to user and rules")
struct UserRulesTests {
    static let rules = exampleRules

    /// Pulls `path` as `token` into `replica`, checking the digest; returns the response.
    @discardableResult
    static func sync(_ client: some TestClientProtocol, _ path: String, _ token: String, _ replica: inout ModelReplica) async throws -> TestResponse {
        var headers: HTTPFields = [:]
        if let etag = replica.etag { headers[.ifNoneMatch] = etag }
        let response = try await client.get(path, as: token, headers)
        _ = try replica.apply(response.reply, sentETag: replica.etag)
        if response.status == .ok || response.status == .notModified {
            #expect(response.header("Delta-Digest") == ModelReplica.digest(of: replica.records), "\(path)")
        }
        return response
    }

    /// The ids of a delta's records: visible ones as they are, tombstones as `-id`.
    static func ids(_ response: TestResponse) throws -> [String] {
        guard case .object(let members) = try JSONValue(parsing: response.bytes), case .array(let items) = members.first?.value else { return [] }
        return try items.map { item in
            let record = try Record(value: item)
            return record.hidden ? "-" + record.id : record.id
        }.sorted()
    }

    @Test("$claim: each user sees their own rows; a selection narrows, never widens; 304s stay bound to the user", arguments: Backend.available)
    func claimRule(backend: Backend) async throws {
        try await withUserServer(backend: backend, rules: Self.rules) { client, _ in
            _ = try await client.write(
                .post, "/api/notes", #"[{"id":"a1","owner":"ada","n":1},{"id":"a2","owner":"ada","n":2},{"id":"b1","owner":"bob","n":1}]"#)
            let ada = try await Mint.hs256("ada")
            let bob = try await Mint.hs256("bob")
            var replica = ModelReplica()
            let first = try await Self.sync(client, "/api/notes", ada, &replica)
            #expect(first.text == #"{"notes":[{"id":"a1","n":1,"owner":"ada"},{"id":"a2","n":2,"owner":"ada"}]}"#)
            let narrow = try await client.get("/api/notes?filter=" + #"{"n":{"eq":1}}"#.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!, as: ada)
            #expect(narrow.text == #"{"notes":[{"id":"a1","n":1,"owner":"ada"}]}"#)
            let wide = try await client.get(
                "/api/notes?filter=" + #"{"owner":{"eq":"bob"}}"#.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!, as: ada)
            #expect(wide.text == #"{"notes":[]}"#)
            let again = try await Self.sync(client, "/api/notes", ada, &replica)
            #expect(again.status == .notModified)
            #expect(again.header("Cache-Control") == "private, no-store")
            // Bob with Ada's token: never a 304, never Ada's delta.
            let stolen = try await client.get("/api/notes", as: bob, [.ifNoneMatch: try #require(replica.etag)])
            #expect(stolen.status == .conflict)
            #expect(stolen.header("Delta-Reset") == "user-changed")
            // A change to Bob's note is nothing to Ada: 304.
            _ = try await client.write(.put, "/api/notes/b1", #"{"id":"b1","owner":"bob","n":5}"#)
            #expect(try await Self.sync(client, "/api/notes", ada, &replica).status == .notModified)
            // Handing a note to Bob tombstones it for Ada.
            _ = try await client.write(.put, "/api/notes/a2", #"{"id":"a2","owner":"bob","n":2}"#)
            let moved = try await Self.sync(client, "/api/notes", ada, &replica)
            #expect(try Self.ids(moved) == ["-a2"])
            #expect(replica.records.keys.sorted() == ["a1"])
            #expect(replica.resets == 0)
            // One record: Ada's is hers; Bob's answers exactly as a record that does not exist.
            #expect(try await client.get("/api/notes/a1", as: ada).status == .ok)
            let others = try await client.get("/api/notes/a2", as: ada)
            let none = try await client.get("/api/notes/zz", as: ada)
            #expect(others.status == .notFound)
            #expect(others.text.replacingOccurrences(of: "a2", with: "zz") == none.text)
            #expect(try await client.get("/api/notes/a1", as: nil).status == .unauthorized)
            #expect(try await client.get("/api/notes/a2", as: secret).status == .ok)
        }
    }

    @Test("$rows: a membership added brings every unchanged row of that team; hidden or moved, it tombstones them; no reset", arguments: Backend.available)
    func grantsAndRevokes(backend: Backend) async throws {
        try await withUserServer(backend: backend, rules: Self.rules) { client, _ in
            _ = try await client.write(
                .post, "/api/posts",
                #"[{"id":"p1","team":"red"},{"id":"p2","team":"red"},{"id":"p3","team":"blue"},{"id":"p4","team":"blue"},{"id":"p5","team":"green"}]"#)
            _ = try await client.write(.post, "/api/members", #"[{"id":"m1","team":"red","user":"ada"},{"id":"m9","team":"green","user":"bob"}]"#)
            let ada = try await Mint.hs256("ada")
            var posts = ModelReplica()
            let first = try await Self.sync(client, "/api/posts", ada, &posts)
            #expect(try Self.ids(first) == ["p1", "p2"])
            // Granted: the blue posts, unchanged since, arrive whole.
            _ = try await client.write(.put, "/api/members/m2", #"{"id":"m2","team":"blue","user":"ada"}"#)
            let granted = try await Self.sync(client, "/api/posts", ada, &posts)
            #expect(granted.header("Delta-Mode") == "delta")
            #expect(try Self.ids(granted) == ["p3", "p4"])
            // Moved to green: blue's posts leave, green's arrive.
            _ = try await client.write(.put, "/api/members/m2", #"{"id":"m2","team":"green","user":"ada"}"#)
            #expect(try Self.ids(try await Self.sync(client, "/api/posts", ada, &posts)) == ["-p3", "-p4", "p5"])
            // Revoked: the red membership hidden, its posts tombstoned.
            _ = try await client.execute(uri: "/api/members/m1", method: .delete, headers: [.authorization: "Bearer \(secret)"])
            #expect(try Self.ids(try await Self.sync(client, "/api/posts", ada, &posts)) == ["-p1", "-p2"])
            #expect(posts.records.keys.sorted() == ["p5"])
            // Bob's membership changing is nothing to Ada.
            _ = try await client.write(.put, "/api/members/m9", #"{"id":"m9","team":"red","user":"bob"}"#)
            #expect(try await Self.sync(client, "/api/posts", ada, &posts).status == .notModified)
            #expect(posts.resets == 0)
            // Members: each user sees their own memberships only.
            var members = ModelReplica()
            try await Self.sync(client, "/api/members", ada, &members)
            #expect(members.records.keys.sorted() == ["m2"])
        }
    }

    @Test(
        "A user's revalidation is answered before the router once their token is verified, exactly: a change to a $rows source goes to the router",
        arguments: Backend.available)
    func earlyNotModified(backend: Backend) async throws {
        try await withUserServer(backend: backend, rules: Self.rules) { client, _ in
            _ = try await client.write(.post, "/api/posts", #"[{"id":"p1","team":"red"},{"id":"p2","team":"blue"}]"#)
            _ = try await client.write(.post, "/api/members", #"[{"id":"m1","team":"red","user":"ada"}]"#)
            let ada = try await Mint.hs256("ada")
            let bob = try await Mint.hs256("bob")
            var posts = ModelReplica()
            try await Self.sync(client, "/api/posts", ada, &posts)
            let before = try await client.metric("deltasnap_early_not_modified_responses")
            let port = try #require(client.port)
            let etag = try #require(posts.etag)
            let again = try await rawExchange(
                port: port, "GET /api/posts HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(ada)\r\nIf-None-Match: \(etag)\r\n\r\n"
            ) {
                $0.hasSuffix("\r\n\r\n")
            }
            #expect(again.hasPrefix("HTTP/1.1 304 Not Modified\r\nCache-Control: private, no-store\r\nVary: "), "\(again)")
            #expect(again.contains(", Authorization\r\nETag: \(etag)\r\n"))
            // Answered before the router on both backends (PostgreSQL's with one shared round trip).
            let early = before + 1
            #expect(try await client.metric("deltasnap_early_not_modified_responses") == early)
            // Another user's token with Ada's tag is never answered early, nor with a 304.
            let stolen = try await client.get("/api/posts", as: bob, [.ifNoneMatch: try #require(posts.etag)])
            #expect(stolen.status == .conflict)
            // A membership (the rule's source) changed: the router computes the grant.
            _ = try await client.write(.put, "/api/members/m2", #"{"id":"m2","team":"blue","user":"ada"}"#)
            let raw = try await rawExchange(port: port, "GET /api/posts HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(ada)\r\nIf-None-Match: \(etag)\r\n\r\n")
            {
                $0.contains("\r\n0\r\n\r\n") || $0.hasPrefix("HTTP/1.1 304")
            }
            #expect(raw.hasPrefix("HTTP/1.1 200 OK"), "\(raw.prefix(200))")
            #expect(raw.contains(#"{"id":"p2","team":"blue"}"#))
            let granted = try await Self.sync(client, "/api/posts", ada, &posts)
            #expect(try Self.ids(granted) == ["p2"])
            #expect(try await client.metric("deltasnap_early_not_modified_responses") == early)
        }
    }

    @Test("has: a shared list edited shares and unshares the document", arguments: Backend.available)
    func sharing(backend: Backend) async throws {
        try await withUserServer(backend: backend, rules: Self.rules) { client, _ in
            _ = try await client.write(.post, "/api/docs", #"[{"id":"d1","owner":"ada","editors":[]},{"id":"d2","owner":"bob","editors":["ada"]}]"#)
            let bob = try await Mint.hs256("bob")
            var docs = ModelReplica()
            #expect(try Self.ids(try await Self.sync(client, "/api/docs", bob, &docs)) == ["d2"])
            _ = try await client.write(.put, "/api/docs/d1", #"{"id":"d1","owner":"ada","editors":["bob"]}"#)
            #expect(try Self.ids(try await Self.sync(client, "/api/docs", bob, &docs)) == ["d1"])
            _ = try await client.write(.put, "/api/docs/d1", #"{"id":"d1","owner":"ada","editors":["cy"]}"#)
            #expect(try Self.ids(try await Self.sync(client, "/api/docs", bob, &docs)) == ["-d1"])
        }
    }

    @Test("Rules changed since a token: 409 rules-changed; the public collection keeps its plain answers", arguments: Backend.available)
    func rulesChanged(backend: Backend) async throws {
        try await withUserServer(backend: backend, rules: Self.rules) { client, store in
            _ = try await client.write(.post, "/api/notes", #"[{"id":"a1","owner":"ada"}]"#)
            let ada = try await Mint.hs256("ada")
            var replica = ModelReplica()
            try await Self.sync(client, "/api/notes", ada, &replica)
            let version = try await store.installRules(try Rules(parsing: Array(Self.rules.replacingOccurrences(of: "airports", with: "ports").utf8)))
            #expect(version == 2)
            // This server still holds version 1: it refuses to answer from rules that are no longer the database's.
            let stale = try await client.get("/api/notes", as: ada, [.ifNoneMatch: try #require(replica.etag)])
            #expect(stale.status == .serviceUnavailable)
            #expect(stale.text.contains("rules-mismatch"))
            let record = try await client.get("/api/notes/a1", as: ada)
            #expect(record.status == .serviceUnavailable && record.text.contains("rules-mismatch"))
            // Nor does it write by them: a user's push and record write are refused, nothing applied.
            let push = #"{"client":"ada-1","mutations":[{"id":1,"collection":"notes","op":"put","record":{"id":"a2"},"base":null,"create":true}]}"#
            let pushed = try await client.execute(
                uri: "/push", method: .post, headers: [.authorization: "Bearer \(ada)", .contentType: "application/json"], body: ByteBuffer(string: push))
            #expect(pushed.status == .serviceUnavailable && String(buffer: pushed.body).contains("rules-mismatch"), "\(String(buffer: pushed.body))")
            let put = try await client.execute(
                uri: "/api/notes/a3", method: .put, headers: [.authorization: "Bearer \(ada)", .contentType: "application/json", .ifNoneMatch: "*"],
                body: ByteBuffer(string: #"{"id":"a3"}"#))
            #expect(put.status == .serviceUnavailable && String(buffer: put.body).contains("rules-mismatch"), "\(String(buffer: put.body))")
            #expect(try await store.record("a2", in: CollectionName("notes")) == nil)
            #expect(try await store.record("a3", in: CollectionName("notes")) == nil)
        }
        // A server started with the new rules answers the old token with rules-changed.
        try await backendWithTwoRules(backend)
    }

    @Test(
        "A server that follows the database's rules decides a request again under a newer version: no 503, rules-changed for old tokens",
        arguments: Backend.available)
    func followsNewerRules(backend: Backend) async throws {
        try await withUserServer(backend: backend, rules: Self.rules, configure: { $0.liveRules = $0.rules.map(LiveRules.init) }) { client, store in
            _ = try await client.write(.post, "/api/airports", #"[{"id":"p1","name":"Paris"}]"#)
            _ = try await client.write(.post, "/api/notes", #"[{"id":"a1","owner":"ada"}]"#)
            #expect(try await client.get("/api/airports", as: nil).status == .ok)
            let ada = try await Mint.hs256("ada")
            var replica = ModelReplica()
            try await Self.sync(client, "/api/notes", ada, &replica)
            // Another instance installs version 2 (here: the store itself), where airports are the owner's alone.
            let first = try Rules(parsing: Array(Self.rules.utf8))
            #expect(try await store.installRules(try Rules(parsing: Array(Self.rules.replacingOccurrences(of: "airports", with: "ports").utf8))) == 2)
            // The push's write transaction finds version 2: decided again under it, and applied.
            let push = #"{"client":"ada-1","mutations":[{"id":1,"collection":"notes","op":"put","record":{"id":"a2"},"base":null,"create":true}]}"#
            let pushed = try await client.execute(
                uri: "/push", method: .post, headers: [.authorization: "Bearer \(ada)", .contentType: "application/json"], body: ByteBuffer(string: push))
            #expect(pushed.status == .ok && String(buffer: pushed.body).contains(#""status":"applied""#), "\(String(buffer: pushed.body))")
            #expect(try await store.record("a2", in: CollectionName("notes")) != nil)
            // Every request after it is decided under version 2, the early answers too.
            #expect(try await client.get("/api/airports", as: nil).status == .unauthorized)
            // Version 3: a record read's transaction finds it, and is answered again under it.
            #expect(try await store.installRules(first) == 3)
            let record = try await client.get("/api/notes/a1", as: ada)
            #expect(record.status == .ok, "\(record.text)")
            let stale = try await client.get("/api/notes", as: ada, [.ifNoneMatch: try #require(replica.etag)])
            #expect(stale.status == .conflict && stale.header("Delta-Reset") == "rules-changed", "\(stale.text)")
        }
    }

    @Test("LiveRules.follow takes the database's newer version within a second", arguments: Backend.available)
    func followsWithinASecond(backend: Backend) async throws {
        try await backend.withStore { store, _ in
            let first = try Rules(parsing: Array(Self.rules.utf8))
            let live = LiveRules(StoredRules(version: try await store.installRules(first), rules: first))
            let follower = Task { await live.follow(store) }
            let version = try await store.installRules(try Rules(parsing: Array(Self.rules.replacingOccurrences(of: "airports", with: "ports").utf8)))
            let start = ContinuousClock.now
            // It asks every half second (`LiveRules.interval`); the wait is for the change itself,
            // bounded only to fail rather than hang: a loaded machine running every suite at
            // once took far longer than a second to give the follower its turn.
            #expect(LiveRules.interval <= .seconds(1))
            while live.current.version != version, ContinuousClock.now - start < .seconds(60) { try await Task.sleep(for: .milliseconds(20)) }
            follower.cancel()
            await follower.value
            #expect(live.current.version == version)
            #expect(live.current.rules.isPublic(try CollectionName("ports")))
        }
    }

    @Test("A collection the rules name that nobody wrote yet: 200 with no rows, then 304, then exactly the user's rows", arguments: Backend.available)
    func unwrittenCollection(backend: Backend) async throws {
        try await withUserServer(backend: backend, rules: Self.rules) { client, _ in
            _ = try await client.write(.post, "/api/airports", #"[{"id":"p1","name":"Paris"}]"#)
            let ada = try await Mint.hs256("ada")
            var replica = ModelReplica()
            let first = try await Self.sync(client, "/api/notes", ada, &replica)
            #expect(first.status == .ok && first.text == #"{"notes":[]}"#, "\(first.text)")
            #expect(first.header("Delta-Mode") == "full")
            #expect(try await Self.sync(client, "/api/notes", ada, &replica).status == .notModified)
            _ = try await client.write(.post, "/api/notes", #"[{"id":"a1","owner":"ada"},{"id":"b1","owner":"bob"}]"#)
            let delta = try await Self.sync(client, "/api/notes", ada, &replica)
            #expect(try Self.ids(delta) == ["a1"])
            #expect(replica.records.keys.sorted() == ["a1"])
        }
    }

    func backendWithTwoRules(_ backend: Backend) async throws {
        try await backend.withStore { store, _ in
            let first = try Rules(parsing: Array(Self.rules.utf8))
            let second = try Rules(parsing: Array(Self.rules.replacingOccurrences(of: "airports", with: "ports").utf8))
            var etag = ""
            for (index, rules) in [first, second].enumerated() {
                var configuration = ServerConfiguration()
                configuration.port = 0
                configuration.writeToken = secret
                configuration.rules = StoredRules(version: try await store.installRules(rules), rules: rules)
                configuration.authenticator = try await Authenticator(secret: userSecret, jwks: nil)
                let app = buildApplication(store: store, earlyVerdicts: store, configuration: configuration)
                let sent = etag
                etag = try await app.testOnServerThreads(.live) { client in
                    if index == 0 { _ = try await client.write(.post, "/api/notes", #"[{"id":"a1","owner":"ada"}]"#) }
                    let response = try await client.get("/api/notes", as: try await Mint.hs256("ada"), sent.isEmpty ? [:] : [.ifNoneMatch: sent])
                    if index == 1 {
                        #expect(response.status == .conflict)
                        #expect(response.header("Delta-Reset") == "rules-changed")
                    }
                    return response.header("ETag") ?? ""
                }
            }
        }
    }
}

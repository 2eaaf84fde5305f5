import DeltaCore
import DeltaServer
import DeltaStore
import DeltaTestSupport
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Testing

@Suite("A row that leaves a user's rule is a bare tombstone: its id, never its content, on every path")
struct UserTombstoneTests {
    /// A user's delta: the exact body, after checking the digest against what the replica holds.
    static func delta(_ client: some TestClientProtocol, _ path: String, _ token: String, _ replica: inout ModelReplica) async throws -> String {
        try await UserRulesTests.sync(client, path, token, &replica).text
    }

    @Test("Moved to another team with new text, edited after a removal, unshared and rewritten: {\"hidden\":true,\"id\":…} alone", arguments: Backend.available)
    func bareTombstones(backend: Backend) async throws {
        try await withUserServer(backend: backend, rules: exampleRules) { client, _ in
            _ = try await client.write(.post, "/api/posts", #"[{"id":"p1","team":"red","text":"red one"},{"id":"p2","team":"red","text":"red two"}]"#)
            _ = try await client.write(.post, "/api/members", #"[{"id":"m1","team":"red","user":"ada"}]"#)
            _ = try await client.write(.post, "/api/docs", #"[{"id":"d1","owner":"cy","editors":["bob"],"text":"draft"}]"#)
            let ada = try await Mint.hs256("ada")
            let bob = try await Mint.hs256("bob")
            var posts = ModelReplica()
            _ = try await Self.delta(client, "/api/posts", ada, &posts)
            let held = try #require(posts.etag)
            // Moved to green with green-only text: Ada's delta names the id alone.
            _ = try await client.write(.put, "/api/posts/p1", #"{"id":"p1","team":"green","text":"green secret"}"#)
            #expect(try await Self.delta(client, "/api/posts", ada, &posts) == #"{"posts":[{"hidden":true,"id":"p1"}]}"#)
            // Removed from red, then a red post edited: nothing written after the removal reaches her,
            // now or on a replay of any older token of hers.
            _ = try await client.execute(uri: "/api/members/m1", method: .delete, headers: [.authorization: "Bearer \(secret)"])
            _ = try await client.write(.put, "/api/posts/p2", #"{"id":"p2","team":"red","text":"after the removal"}"#)
            #expect(try await Self.delta(client, "/api/posts", ada, &posts) == #"{"posts":[{"hidden":true,"id":"p2"}]}"#)
            let replay = try await client.get("/api/posts", as: ada, [.ifNoneMatch: held])
            #expect(replay.status == .ok)
            #expect(replay.text == #"{"posts":[{"hidden":true,"id":"p1"},{"hidden":true,"id":"p2"}]}"#)
            #expect(!replay.text.contains("secret") && !replay.text.contains("after the removal"))
            // A sharing list: unshared and rewritten in one commit.
            var docs = ModelReplica()
            _ = try await Self.delta(client, "/api/docs", bob, &docs)
            _ = try await client.write(.put, "/api/docs/d1", #"{"id":"d1","owner":"cy","editors":[],"text":"rewritten for cy"}"#)
            #expect(try await Self.delta(client, "/api/docs", bob, &docs) == #"{"docs":[{"hidden":true,"id":"d1"}]}"#)
            // Hidden by its owner after an edit: the same.
            _ = try await client.write(.post, "/api/notes", #"[{"id":"n1","owner":"bob","text":"v1"}]"#)
            var notes = ModelReplica()
            _ = try await Self.delta(client, "/api/notes", bob, &notes)
            _ = try await client.write(.put, "/api/notes/n1", #"{"id":"n1","owner":"bob","text":"v2"}"#)
            _ = try await client.execute(uri: "/api/notes/n1", method: .delete, headers: [.authorization: "Bearer \(secret)"])
            #expect(try await Self.delta(client, "/api/notes", bob, &notes) == #"{"notes":[{"hidden":true,"id":"n1"}]}"#)
            #expect(notes.records.isEmpty && posts.records.isEmpty && docs.records.isEmpty)
        }
    }

    @Test("Through a grant URL, answered from the server's memory too: the same bare tombstones", arguments: Backend.available)
    func grantedTombstones(backend: Backend) async throws {
        try await withUserServer(backend: backend, rules: exampleRules, grantLifetime: 300) { client, _ in
            _ = try await client.write(.post, "/api/notes", #"[{"id":"n1","owner":"ada","text":"mine"},{"id":"n2","owner":"ada","text":"also"}]"#)
            let ada = try await Mint.hs256("ada")
            let first = try await client.get("/api/notes", as: ada)
            let etag = try #require(first.header("ETag"))
            _ = try await client.write(.put, "/api/notes/n1", #"{"id":"n1","owner":"bob","text":"bob's now"}"#)
            // Twice: computed, then kept; both the user's own read and the URL it is sent to.
            for _ in 0..<2 {
                let redirect = try await client.get("/api/notes", as: ada, [.ifNoneMatch: etag, HTTPField.Name("Delta-Redirect")!: "1"])
                #expect(redirect.status == .temporaryRedirect)
                let location = try #require(redirect.header("Location"))
                let granted = try await client.get("/api/" + location, as: nil)
                #expect(granted.status == .ok)
                #expect(granted.text == #"{"notes":[{"hidden":true,"id":"n1"}]}"#)
            }
        }
    }
}

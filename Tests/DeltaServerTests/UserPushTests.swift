import DeltaCore
import DeltaServer
import DeltaStore
import DeltaTestSupport
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Testing

@Suite("Users' writes under rules: checked in the transaction, denied ones answered, client ids owned")
struct UserPushTests {
    static func push(_ client: some TestClientProtocol, _ token: String, _ body: String) async throws -> TestResponse {
        try await client.write(.post, "/push", body, auth: "Bearer \(token)")
    }

    @Test("Stamps overwrite what the app sent; another user's row is denied (rule write, server null); the push goes on", arguments: Backend.available)
    func denied(backend: Backend) async throws {
        try await withUserServer(backend: backend, rules: UserRulesTests.rules) { client, store in
            _ = try await client.write(.post, "/api/notes", #"[{"id":"b1","owner":"bob","text":"bob's"}]"#)
            let ada = try await Mint.hs256("ada")
            let body = pushBody(
                #"{"id":1,"collection":"notes","op":"put","record":{"id":"n1","owner":"mallory","text":"mine"},"base":null,"create":true}"#,
                #"{"id":2,"collection":"notes","op":"put","record":{"id":"b1","owner":"ada","text":"taken"},"base":null}"#,
                #"{"id":3,"collection":"notes","op":"delete","recordId":"b1","base":null}"#,
                #"{"id":4,"collection":"notes","op":"put","record":{"id":"n2","text":"more"},"base":null,"create":true}"#, client: "ada-phone")
            let answer = try await Self.push(client, ada, body)
            #expect(answer.status == .ok, "\(answer.text)")
            #expect(
                answer.text
                    == #"{"lastMutationId":4,"results":[{"id":1,"status":"applied"},{"id":2,"rule":"write","server":null,"status":"denied"},{"id":3,"rule":"write","server":null,"status":"denied"},{"id":4,"status":"applied"}]}"#
                    + "\n")
            let notes = try await client.get("/api/notes", as: secret)
            #expect(
                notes.text
                    == #"{"notes":[{"id":"b1","owner":"bob","text":"bob's"},{"id":"n1","owner":"ada","text":"mine"},{"id":"n2","owner":"ada","text":"more"}]}"#)
            // The log names the user of each applied mutation.
            let log = try await store.mutationLog(try CollectionName("notes"), id: nil, after: 0, limit: 10)
            #expect(log.map(\.id) == ["n1", "n2"])
            #expect(log.allSatisfy { $0.user == "ada" && $0.client == "ada-phone" && $0.operation == "put" })
            #expect(log.map(\.mutation) == [1, 4])
        }
    }

    @Test("A denied write of a row the user can read carries the server's copy; one that would give it away is denied", arguments: Backend.available)
    func visibleDenial(backend: Backend) async throws {
        try await withUserServer(backend: backend, rules: UserRulesTests.rules) { client, _ in
            _ = try await client.write(.post, "/api/members", #"[{"id":"m1","team":"red","user":"ada"}]"#)
            _ = try await client.write(.post, "/api/posts", #"[{"id":"p1","team":"red"}]"#)
            let ada = try await Mint.hs256("ada")
            let body = pushBody(
                #"{"id":1,"collection":"posts","op":"put","record":{"id":"p1","team":"blue"},"base":null}"#,
                #"{"id":2,"collection":"posts","op":"put","record":{"id":"p2","team":"red"},"base":null,"create":true}"#, client: "ada-tab")
            let answer = try await Self.push(client, ada, body)
            #expect(
                answer.text
                    == #"{"lastMutationId":2,"results":[{"id":1,"rule":"write","server":{"id":"p1","team":"red"},"status":"denied"},{"id":2,"status":"applied"}]}"#
                    + "\n")
            // A conditional record write is checked the same way: 403 denied, nothing written.
            let etag = try #require(try await client.get("/api/posts/p1", as: secret).header("ETag"))
            let put = try await client.execute(
                uri: "/api/posts/p1", method: .put,
                headers: [.authorization: "Bearer \(ada)", .contentType: "application/json", .ifMatch: etag],
                body: ByteBuffer(string: #"{"id":"p1","team":"green"}"#))
            #expect(put.status == .forbidden)
            #expect(put.text.contains(#""type":"urn:deltasnap:problem:denied""#))
            let allowed = try await client.execute(
                uri: "/api/posts/p1", method: .put,
                headers: [.authorization: "Bearer \(ada)", .contentType: "application/json", .ifMatch: etag],
                body: ByteBuffer(string: #"{"id":"p1","team":"red","t":1}"#))
            #expect(allowed.status == .ok, "\(allowed.text)")
            // A delete of a record Ada may not read answers exactly as one of a record that does not exist.
            _ = try await client.write(.post, "/api/posts", #"[{"id":"p9","team":"green"}]"#)
            func delete(_ id: String) async throws -> TestResponse {
                try await client.execute(uri: "/api/posts/\(id)", method: .delete, headers: [.authorization: "Bearer \(ada)", .ifMatch: etag])
            }
            let hidden = try await delete("p9")
            let none = try await delete("p8")
            #expect(hidden.status == .notFound)
            #expect(hidden.text.replacingOccurrences(of: "p9", with: "p8") == none.text)
        }
    }

    @Test(
        "A client id belongs to the first user that pushes with it: another user's push, or the client key's, is 403 client-owned", arguments: Backend.available
    )
    func clientOwned(backend: Backend) async throws {
        try await withUserServer(backend: backend, rules: UserRulesTests.rules, configure: { $0.clientWritable = ["notes"] }) { client, _ in
            let ada = try await Mint.hs256("ada")
            let bob = try await Mint.hs256("bob")
            let first = pushBody(#"{"id":1,"collection":"notes","op":"put","record":{"id":"n1","text":"a"},"base":null,"create":true}"#, client: "victim-uuid")
            #expect(try await Self.push(client, ada, first).status == .ok)
            let second = pushBody(#"{"id":2,"collection":"notes","op":"put","record":{"id":"n2","text":"b"},"base":null,"create":true}"#, client: "victim-uuid")
            for token in [bob, "client-key-123"] {
                let refused = try await Self.push(client, token, second)
                #expect(refused.status == .forbidden)
                #expect(refused.text.contains(#""type":"urn:deltasnap:problem:client-owned""#))
            }
            #expect(try await client.get("/api/notes", as: secret).text == #"{"notes":[{"id":"n1","owner":"ada","text":"a"}]}"#)
            // Ada's own next mutation still follows on.
            #expect(try await Self.push(client, ada, second).status == .ok)
        }
    }
}

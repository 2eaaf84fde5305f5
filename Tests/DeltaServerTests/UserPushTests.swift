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
    /// Anyone signed in may create a draft; only its owner reads or writes it.
    static let draftRules = #"""
        {"collections": {"drafts": {"read":   {"owner": {"eq": {"$claim": "sub"}}},
                                    "write":  {"owner": {"eq": {"$claim": "sub"}}},
                                    "create": true,
                                    "stamp":  {"owner": {"$claim": "sub"}}}}}
        """#

    @Test(
        "\"create\": true decides only ids never stored: another user's hidden row is denied by write, whatever the base or precondition, never shown",
        arguments: Backend.available)
    func createOverHidden(backend: Backend) async throws {
        try await withUserServer(backend: backend, rules: Self.draftRules) { client, _ in
            _ = try await client.write(.post, "/api/drafts", #"[{"hidden":true,"id":"d1","owner":"bob","text":"bob's secret"}]"#)
            let ada = try await Mint.hs256("ada")
            #expect(try await client.get("/api/drafts/d1", as: ada).status == .notFound)
            let base = try #require(try await client.get("/api/drafts", as: secret).header("ETag")).replacingOccurrences(of: "\"", with: "\\\"")
            let answer = try await Self.push(
                client, ada,
                pushBody(
                    #"{"id":1,"collection":"drafts","op":"put","record":{"id":"d1","text":"mine"},"base":null,"create":true}"#,
                    #"{"id":2,"collection":"drafts","op":"put","record":{"id":"d1","text":"mine"},"base":"\#(base)"}"#,
                    #"{"id":3,"collection":"drafts","op":"put","record":{"id":"d2","text":"new"},"base":null,"create":true}"#, client: "ada-phone"))
            let denied = #"{"id":1,"rule":"write","server":null,"status":"denied"},{"id":2,"rule":"write","server":null,"status":"denied"}"#
            #expect(answer.text == #"{"lastMutationId":3,"results":[\#(denied),{"id":3,"status":"applied"}]}"# + "\n")
            for precondition: HTTPFields in [[.ifNoneMatch: "*"], [.ifMatch: #""1.0000000000000001.1.00000001""#], [.ifMatch: "*"]] {
                var headers: HTTPFields = [.authorization: "Bearer \(ada)", .contentType: "application/json"]
                headers.append(contentsOf: precondition)
                let refused = try await client.execute(
                    uri: "/api/drafts/d1", method: .put, headers: headers, body: ByteBuffer(string: #"{"id":"d1","text":"mine"}"#))
                #expect(refused.status == .forbidden, "\(precondition)")
                #expect(refused.text.contains(#""rule":"write""#) && !refused.text.contains("secret"), "\(refused.text)")
                #expect(refused.header("ETag") == nil)
            }
            #expect(try await client.get("/api/drafts/d1", as: secret).text == #"{"hidden":true,"id":"d1","owner":"bob","text":"bob's secret"}"# + "\n")
            // Bob's own hidden draft: the conflict shows only that it is hidden, and his resolution restores it.
            let bob = try await Mint.hs256("bob")
            let restore = pushBody(#"{"id":1,"collection":"drafts","op":"put","record":{"id":"d1","text":"back"},"base":null}"#, client: "bob-laptop")
            let conflict = try #require(try PushResponse(parsing: try await Self.push(client, bob, restore).bytes).results.first)
            #expect(conflict.status == .conflict && conflict.reason == "hidden")
            #expect(conflict.server?.wireJSON == Array(#"{"hidden":true,"id":"d1"}"#.utf8))
            let resolved = try #require(conflict.base).replacingOccurrences(of: "\"", with: "\\\"")
            let keep = pushBody(#"{"id":2,"collection":"drafts","op":"put","record":{"id":"d1","text":"back"},"base":"\#(resolved)"}"#, client: "bob-laptop")
            let kept = try await Self.push(client, bob, keep)
            #expect(kept.text == #"{"lastMutationId":2,"results":[{"id":2,"status":"applied"}]}"# + "\n")
            #expect(try await client.get("/api/drafts/d1", as: bob).text == #"{"id":"d1","owner":"bob","text":"back"}"# + "\n")
        }
    }

    @Test(
        "The client key on a restricted collection it writes: a conflict or failed precondition over a row it may not read is denied (rule read)",
        arguments: Backend.available)
    func unreadableConflicts(backend: Backend) async throws {
        try await withUserServer(backend: backend, rules: UserRulesTests.rules, configure: { $0.clientWritable = ["notes"] }) { client, _ in
            _ = try await client.write(
                .post, "/api/notes", #"[{"id":"b1","owner":"bob","text":"bob's"},{"hidden":true,"id":"b2","owner":"bob","text":"gone"}]"#)
            let answer = try await Self.push(
                client, "client-key-123",
                pushBody(
                    #"{"id":1,"collection":"notes","op":"put","record":{"id":"b1","owner":"bob","text":"bob's"},"base":null}"#,
                    #"{"id":2,"collection":"notes","op":"put","record":{"id":"b2","text":"mine"},"base":null,"create":true}"#,
                    #"{"id":3,"collection":"notes","op":"delete","recordId":"b2","base":null}"#,
                    #"{"id":4,"collection":"notes","op":"put","record":{"id":"b1","text":"guess"},"base":null}"#,
                    #"{"id":5,"collection":"notes","op":"delete","recordId":"zz","base":null}"#, client: "app-install"))
            func denied(_ id: Int) -> String { #"{"id":\#(id),"rule":"read","server":null,"status":"denied"}"# }
            let unchanged = #"{"id":3,"status":"unchanged"}"#
            #expect(
                answer.text
                    == #"{"lastMutationId":5,"results":[\#(denied(1)),\#(denied(2)),\#(unchanged),\#(denied(4)),{"id":5,"status":"unchanged"}]}"# + "\n")
            func put(_ id: String, _ precondition: HTTPFields) async throws -> TestResponse {
                var headers: HTTPFields = [.authorization: "Bearer client-key-123", .contentType: "application/json"]
                headers.append(contentsOf: precondition)
                return try await client.execute(uri: "/api/notes/\(id)", method: .put, headers: headers, body: ByteBuffer(string: #"{"id":"\#(id)"}"#))
            }
            for id in ["b1", "b2"] {
                for precondition: HTTPFields in [[.ifNoneMatch: "*"], [.ifMatch: #""1.0000000000000001.1.00000001""#]] {
                    let refused = try await put(id, precondition)
                    #expect(refused.status == .forbidden, "\(id) \(precondition)")
                    #expect(refused.text.contains(#""rule":"read""#) && !refused.text.contains("bob") && !refused.text.contains("gone"), "\(refused.text)")
                    #expect(refused.header("ETag") == nil)
                }
            }
            let missing = try await put("zz", [.ifMatch: #""1.0000000000000001.1.00000001""#])
            #expect(missing.status == .preconditionFailed && !missing.text.contains(#""record":"#))
            #expect(try await client.get("/api/notes/b1", as: secret).text == #"{"id":"b1","owner":"bob","text":"bob's"}"# + "\n")
            #expect(try await client.get("/api/notes/b2", as: secret).text == #"{"hidden":true,"id":"b2","owner":"bob","text":"gone"}"# + "\n")
        }
    }

    @Test(
        "A client id the client key pushed with first is the client key's: a user's or the owner's push with it is 403 client-owned, hears no answer",
        arguments: Backend.available)
    func clientKeyFirst(backend: Backend) async throws {
        try await withUserServer(backend: backend, rules: UserRulesTests.rules, configure: { $0.clientWritable = ["notes"] }) { client, _ in
            let first = pushBody(
                #"{"id":1,"collection":"notes","op":"put","record":{"id":"k1","owner":"bob","text":"an app's"},"base":null,"create":true}"#,
                client: "install-1")
            #expect(try await Self.push(client, "client-key-123", first).text == #"{"lastMutationId":1,"results":[{"id":1,"status":"applied"}]}"# + "\n")
            let second = pushBody(#"{"id":2,"collection":"notes","op":"put","record":{"id":"k2","text":"taken"},"base":null}"#, client: "install-1")
            let ada = try await Mint.hs256("ada")
            for token in [ada, secret] {
                for body in [first, second] {
                    let refused = try await Self.push(client, token, body)
                    #expect(refused.status == .forbidden)
                    #expect(refused.text.contains(#""type":"urn:deltasnap:problem:client-owned""#) && !refused.text.contains("lastMutationId"))
                }
            }
            #expect(try await client.get("/api/notes/k2", as: secret).status == .notFound)
            // The install is not locked out.
            #expect(try await Self.push(client, "client-key-123", second).text == #"{"lastMutationId":2,"results":[{"id":2,"status":"applied"}]}"# + "\n")
            // The owner's secret owns the ids it pushes with first, too.
            let tool = pushBody(#"{"id":1,"collection":"notes","op":"put","record":{"id":"o1"},"base":null}"#, client: "tool-1")
            #expect(try await Self.push(client, secret, tool).status == .ok)
            #expect(try await Self.push(client, "client-key-123", tool).status == .forbidden)
        }
    }

    @Test(
        "Delta-Last-Mutation is told to the client id's principal only; any other pull hears 0, as of a client that never pushed", arguments: Backend.available)
    func lastMutationHeard(backend: Backend) async throws {
        try await withUserServer(backend: backend, rules: UserRulesTests.rules, configure: { $0.clientWritable = ["notes"] }) { client, _ in
            _ = try await client.write(.post, "/api/airports", #"[{"id":"p1"}]"#)
            let ada = try await Mint.hs256("ada")
            let bob = try await Mint.hs256("bob")
            let mine = pushBody(#"{"id":1,"collection":"notes","op":"put","record":{"id":"n1","text":"a"},"base":null,"create":true}"#, client: "ada-phone")
            #expect(try await Self.push(client, ada, mine).status == .ok)
            let app = pushBody(#"{"id":1,"collection":"notes","op":"put","record":{"id":"k1"},"base":null}"#, client: "app-1")
            #expect(try await Self.push(client, "client-key-123", app).status == .ok)
            func heard(_ path: String, _ token: String?, _ id: String) async throws -> String? {
                try await client.get(path, as: token, [HTTPField.Name("Delta-Client")!: id]).header("Delta-Last-Mutation")
            }
            #expect(try await heard("/api/notes", ada, "ada-phone") == "1")
            #expect(try await heard("/api/airports", ada, "ada-phone") == "1")
            #expect(try await heard("/api/notes", secret, "ada-phone") == "1")
            #expect(try await heard("/api/notes", bob, "ada-phone") == "0")
            #expect(try await heard("/api/airports", nil, "ada-phone") == "0")
            #expect(try await heard("/api/airports", "client-key-123", "ada-phone") == "0")
            // The client key's ids: apps pull public collections without a credential, so every reader hears them.
            #expect(try await heard("/api/airports", nil, "app-1") == "1")
            #expect(try await heard("/api/notes", bob, "app-1") == "1")
        }
    }
}

import DeltaCore
import DeltaServer
import DeltaStore
import DeltaTestSupport
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOCore
import Testing

/// The key the push tests' servers accept from apps; `notes` is writable by apps, `w` is not.
let clientKey = "client-key-456"

/// A server that takes pushes to `notes`.
func withPushServer<T: Sendable>(
    _ transport: Transport = .loopback, backend: Backend, _ body: @escaping @Sendable (any TestClientProtocol, any ChangeStore) async throws -> T
) async throws -> T {
    try await withServer(
        transport, backend: backend,
        configure: {
            $0.clientKey = clientKey
            $0.clientWritable = ["notes"]
        }, body)
}

extension TestClientProtocol {
    /// `POST /push` with the client key.
    func push(_ json: String, auth: String? = "Bearer \(clientKey)") async throws -> TestResponse {
        try await write(.post, "/push", json, auth: auth)
    }

    /// The collection's current ETag.
    func etag(_ collection: String) async throws -> String {
        try #require(try await get("/api/\(collection)").header("ETag"))
    }
}

/// A push body of `mutations` (JSON texts) from client `c1`.
func pushBody(_ mutations: String..., client: String = "c1") -> String {
    #"{"client":"\#(client)","mutations":[\#(mutations.joined(separator: ","))]}"#
}

@Suite("Push: apps' writes, exactly once, conflicts never silent")
struct PushAPITests {
    @Test(
        "A push applies in order and answers each mutation; repeating it changes nothing and answers the same bytes", arguments: Transport.allCases,
        Backend.available)
    func appliesOnce(transport: Transport, backend: Backend) async throws {
        try await withPushServer(transport, backend: backend) { client, store in
            let body = pushBody(
                #"{"id":1,"collection":"notes","op":"put","record":{"id":"n1","text":"hello"},"base":null,"create":true}"#,
                #"{"id":2,"collection":"notes","op":"put","record":{"id":"n2","text":"world"},"base":null}"#,
                #"{"id":3,"collection":"notes","op":"put","record":{"id":"n1","text":"hello!"},"base":null}"#,
                #"{"id":4,"collection":"notes","op":"delete","recordId":"n2","base":null}"#)
            let first = try await client.push(body)
            #expect(first.status == .ok)
            #expect(first.header("Content-Type") == "application/json")
            #expect(
                first.text
                    == #"{"lastMutationId":4,"results":[{"id":1,"status":"applied"},{"id":2,"status":"applied"},{"id":3,"status":"applied"},{"id":4,"status":"applied"}]}"#
                    + "\n")
            let head = try await store.headPosition()
            let again = try await client.push(body)
            #expect(again.text == first.text)
            #expect(try await store.headPosition() == head)
            let full = try await client.get("/api/notes")
            #expect(full.text == #"{"notes":[{"id":"n1","text":"hello!"}]}"#)
            // A later push may start after what the client heard: the same answers, then the new one.
            let more = try await client.push(pushBody(#"{"id":5,"collection":"notes","op":"put","record":{"id":"n3"},"base":null}"#))
            #expect(more.text == #"{"lastMutationId":5,"results":[{"id":5,"status":"applied"}]}"# + "\n")
        }
    }

    @Test("Gaps and reused ids with another payload get 409 and change nothing", arguments: Backend.available)
    func sequence(backend: Backend) async throws {
        try await withPushServer(backend: backend) { client, store in
            _ = try await client.push(pushBody(#"{"id":1,"collection":"notes","op":"put","record":{"id":"a"},"base":null}"#))
            let head = try await store.headPosition()
            let gap = try await client.push(pushBody(#"{"id":3,"collection":"notes","op":"put","record":{"id":"b"},"base":null}"#))
            #expect(gap.status == .conflict)
            #expect(gap.header("Content-Type") == "application/problem+json")
            #expect(gap.text.contains(#"mutation 3 of client \"c1\": leaves a gap: the next id must be 2 (last mutation 1)"#))
            #expect(gap.text.contains(#""lastMutationId":1"#))
            let reused = try await client.push(pushBody(#"{"id":1,"collection":"notes","op":"put","record":{"id":"a","v":2},"base":null}"#))
            #expect(reused.status == .conflict)
            #expect(reused.text.contains("reuses an id with a different payload"))
            #expect(try await store.headPosition() == head)
            #expect(try await client.get("/api/notes").text == #"{"notes":[{"id":"a"}]}"#)
        }
    }

    @Test("Conflicts: edited, hidden, created over, unknown base; the server's copy comes back, and keeping local applies", arguments: Backend.available)
    func conflicts(backend: Backend) async throws {
        try await withPushServer(backend: backend) { client, _ in
            _ = try await client.write(.post, "/api/notes", #"[{"id":"e","v":1},{"id":"h","v":1},{"id":"x","v":1}]"#)
            let base = try await client.etag("notes")
            _ = try await client.write(.put, "/api/notes/e", #"{"id":"e","v":2}"#)
            _ = try await client.write(.delete, "/api/notes/h", "")
            let foreign = #"W/\"1.00000000000000aa.1.00000001\""#
            let answer = try await client.push(
                pushBody(
                    #"{"id":1,"collection":"notes","op":"put","record":{"id":"e","v":10},"base":"\#(base.replacingOccurrences(of: "\"", with: "\\\""))"}"#,
                    #"{"id":2,"collection":"notes","op":"put","record":{"id":"h","v":10},"base":"\#(base.replacingOccurrences(of: "\"", with: "\\\""))"}"#,
                    #"{"id":3,"collection":"notes","op":"put","record":{"id":"x","v":10},"base":null,"create":true}"#,
                    #"{"id":4,"collection":"notes","op":"delete","recordId":"e","base":"\#(base.replacingOccurrences(of: "\"", with: "\\\""))"}"#,
                    #"{"id":5,"collection":"notes","op":"put","record":{"id":"x","v":11},"base":"\#(foreign)"}"#))
            let parsed = try PushResponse(parsing: answer.bytes)
            #expect(parsed.lastMutationID == 5)
            #expect(parsed.results.map(\.status) == [.conflict, .conflict, .conflict, .conflict, .conflict])
            #expect(parsed.results.map(\.reason) == ["changed", "hidden", "exists", "changed", "unknown-base"])
            #expect(parsed.results[0].server?.wireJSON == Array(#"{"id":"e","v":2}"#.utf8))
            #expect(parsed.results[1].server?.wireJSON == Array(#"{"hidden":true,"id":"h","v":1}"#.utf8))
            let current = try #require(parsed.results[0].base)
            #expect(try await client.get("/api/notes/e").text == #"{"id":"e","v":2}"# + "\n")
            // Keep local: sent again on top of the server's current version.
            let kept = try await client.push(
                pushBody(
                    #"{"id":6,"collection":"notes","op":"put","record":{"id":"e","v":10},"base":"\#(current.replacingOccurrences(of: "\"", with: "\\\""))"}"#))
            #expect(kept.text == #"{"lastMutationId":6,"results":[{"id":6,"status":"applied"}]}"# + "\n")
            #expect(try await client.get("/api/notes/e").text == #"{"id":"e","v":10}"# + "\n")
            // The same content as the server's is not a conflict, whatever the base.
            let same = try await client.push(pushBody(#"{"id":7,"collection":"notes","op":"put","record":{"id":"x","v":1},"base":null}"#))
            #expect(same.text.contains(#"{"id":7,"status":"unchanged"}"#))
        }
    }

    @Test("An app's later edit of its own pushed record is not a conflict with itself", arguments: Backend.available)
    func ownEdits(backend: Backend) async throws {
        try await withPushServer(backend: backend) { client, _ in
            _ = try await client.write(.post, "/api/notes", #"[{"id":"a","v":1}]"#)
            let base = try await client.etag("notes").replacingOccurrences(of: "\"", with: "\\\"")
            let answer = try await client.push(
                pushBody(
                    #"{"id":1,"collection":"notes","op":"put","record":{"id":"a","v":2},"base":"\#(base)"}"#,
                    #"{"id":2,"collection":"notes","op":"put","record":{"id":"a","v":3},"base":"\#(base)"}"#))
            #expect(answer.text == #"{"lastMutationId":2,"results":[{"id":1,"status":"applied"},{"id":2,"status":"applied"}]}"# + "\n")
            // Another client with the same old base conflicts.
            let other = try await client.push(pushBody(#"{"id":1,"collection":"notes","op":"put","record":{"id":"a","v":9},"base":"\#(base)"}"#, client: "c2"))
            #expect(other.text.contains(#""reason":"changed","server":{"id":"a","v":3},"status":"conflict""#))
        }
    }

    @Test("Who may push: 401 without the key; a mutation in a collection apps may not write is denied, the others apply", arguments: Backend.available)
    func authorization(backend: Backend) async throws {
        try await withPushServer(backend: backend) { client, store in
            let body = pushBody(#"{"id":1,"collection":"notes","op":"put","record":{"id":"a"},"base":null}"#)
            #expect(try await client.push(body, auth: nil).status == .unauthorized)
            #expect(try await client.push(body, auth: "Bearer wrong-key-789").status == .unauthorized)
            let mixed = pushBody(
                #"{"id":1,"collection":"notes","op":"put","record":{"id":"a"},"base":null}"#,
                #"{"id":2,"collection":"w","op":"put","record":{"id":"a"},"base":null}"#)
            let answered = try await client.push(mixed)
            #expect(answered.status == .ok)
            #expect(
                answered.text == #"{"lastMutationId":2,"results":[{"id":1,"status":"applied"},{"id":2,"rule":"collection","server":null,"status":"denied"}]}"#
                    + "\n")
            #expect(try await store.record("a", in: try CollectionName("w")) == nil)
            // A record write there is still refused whole: 403 not-writable.
            let write = try await client.execute(
                uri: "/api/w/a", method: .put,
                headers: [.contentType: "application/json", .authorization: "Bearer \(clientKey)", .ifNoneMatch: "*"], body: ByteBuffer(string: #"{"id":"a"}"#))
            #expect(write.status == .forbidden)
            #expect(write.text.contains("collection w: apps may not write it"))
            // The client key is not the owner's: no batch writes, no unconditional writes.
            #expect(try await client.write(.post, "/api/notes", #"[{"id":"a"}]"#, auth: "Bearer \(clientKey)").status == .forbidden)
            #expect(try await client.push(pushBody(#"{"id":3,"collection":"notes","op":"put","record":{"id":"b"},"base":null}"#)).status == .ok)
        }
    }

    @Test("Hostile push bodies get 400 problems and change nothing", arguments: Backend.available)
    func hostile(backend: Backend) async throws {
        try await withPushServer(backend: backend) { client, store in
            let cases: [(String, String)] = [
                ("[]", "push: the body must be a JSON object (found an array)"),
                ("{", "push: the body is not JSON"),
                (#"{"mutations":[]}"#, #"push: \"client\" must be a string"#),
                (#"{"client":"c","mutations":[]}"#, #"push: \"mutations\" must be a non-empty array"#),
                (#"{"client":"c","mutations":[7]}"#, "push: a mutation must be a JSON object (found a number)"),
                (
                    #"{"client":"c","mutations":[{"id":0,"collection":"notes","op":"put","record":{"id":"a"}}]}"#,
                    #"push: \"id\" must be a whole number from 1 to 2^53 (0)"#
                ),
                (#"{"client":"c","mutations":[{"id":1.5,"collection":"notes","op":"put","record":{"id":"a"}}]}"#, #"\"id\" must be a whole number"#),
                (#"{"client":"c","mutations":[{"id":1,"collection":"no/tes","op":"put","record":{"id":"a"}}]}"#, #"\"collection\" is not a collection name"#),
                (#"{"client":"c","mutations":[{"id":1,"collection":"notes","op":"patch","record":{"id":"a"}}]}"#, #"\"op\" must be \"put\" or \"delete\""#),
                (#"{"client":"c","mutations":[{"id":1,"collection":"notes","op":"put"}]}"#, #"a put needs a \"record\""#),
                (#"{"client":"c","mutations":[{"id":1,"collection":"notes","op":"delete"}]}"#, #"\"recordId\" must be a string"#),
                (
                    #"{"client":"c","mutations":[{"id":1,"collection":"notes","op":"put","record":{"id":"a"},"base":"yesterday"}]}"#,
                    #"\"base\" must be an ETag"#
                ),
                (
                    #"{"client":"c","mutations":[{"id":1,"collection":"notes","op":"put","record":{"id":"a"}},{"id":3,"collection":"notes","op":"put","record":{"id":"b"}}]}"#,
                    "mutation ids must count up by one (1 then 3)"
                ),
            ]
            for (body, message) in cases {
                let response = try await client.push(body)
                #expect(response.status == .badRequest, "\(body)")
                #expect(response.header("Content-Type") == "application/problem+json")
                #expect(response.text.contains(message), "\(body): \(response.text)")
            }
            // Unusable records are answered "invalid" (the mutation is used up, so the app's queue moves on).
            let invalid = try await client.push(
                pushBody(
                    #"{"id":1,"collection":"notes","op":"put","record":[1],"recordId":"a","base":null}"#,
                    #"{"id":2,"collection":"notes","op":"put","record":{"id":"a","hidden":true},"base":null}"#,
                    #"{"id":3,"collection":"notes","op":"put","record":{"id":"b"},"recordId":"c","base":null}"#))
            #expect(invalid.status == .ok, "\(invalid.text)")
            let parsed = try PushResponse(parsing: invalid.bytes)
            #expect(parsed.results.map(\.status) == [.invalid, .invalid, .invalid])
            #expect(parsed.results[0].reason == "record: must be a JSON object (found an array)")
            #expect(try await store.headPosition() == 0)
        }
    }

    @Test("Delta-Client pulls carry Delta-Last-Mutation on 200 and 304, never from the early 304 paths", arguments: Backend.available)
    func lastMutationOnPull(backend: Backend) async throws {
        try await withPushServer(backend: backend) { client, _ in
            _ = try await client.push(pushBody(#"{"id":1,"collection":"notes","op":"put","record":{"id":"a"},"base":null}"#))
            let full = try await client.get("/api/notes", [HTTPField.Name("Delta-Client")!: "c1"])
            #expect(full.header("Delta-Last-Mutation") == "1")
            #expect(full.header("Vary") == "Accept-Encoding, If-None-Match, If-Modified-Since, Delta-Client")
            let etag = try #require(full.header("ETag"))
            let unseen = try await client.get("/api/notes", [.ifNoneMatch: etag, HTTPField.Name("Delta-Client")!: "c9"])
            #expect(unseen.status == .notModified)
            #expect(unseen.header("Delta-Last-Mutation") == "0")
            _ = try await client.push(pushBody(#"{"id":2,"collection":"notes","op":"put","record":{"id":"a"},"base":null}"#))
            let repeated = try await client.get("/api/notes", [.ifNoneMatch: etag, HTTPField.Name("Delta-Client")!: "c1"])
            #expect(repeated.status == .notModified)
            #expect(repeated.header("Delta-Last-Mutation") == "2")
            #expect(try await client.get("/api/notes", [.ifNoneMatch: etag]).header("Delta-Last-Mutation") == nil)
        }
    }

    @Test(
        "One record: GET with a strong ETag; apps' writes need If-Match (428), stale ones get 412 and the record", arguments: Transport.allCases,
        Backend.available)
    func recordPreconditions(transport: Transport, backend: Backend) async throws {
        try await withPushServer(transport, backend: backend) { client, _ in
            _ = try await client.write(.post, "/api/notes", #"[{"id":"a","v":1},{"id":"b","v":1,"hidden":true}]"#)
            let a = try await client.get("/api/notes/a")
            #expect(a.status == .ok)
            #expect(a.text == #"{"id":"a","v":1}"# + "\n")
            let tag = try #require(a.header("ETag"))
            #expect(tag.hasPrefix("\"1.") && !tag.hasPrefix("W/"))
            #expect(try await client.get("/api/notes/b").text == #"{"hidden":true,"id":"b","v":1}"# + "\n")
            #expect(try await client.get("/api/notes/zz").status == .notFound)
            #expect(try await client.get("/api/notes/a", [.ifNoneMatch: tag]).status == .notModified)
            func put(_ id: String, _ json: String, _ headers: HTTPFields) async throws -> TestResponse {
                var fields: HTTPFields = [.contentType: "application/json", .authorization: "Bearer \(clientKey)"]
                fields.append(contentsOf: headers)
                return try await client.execute(uri: "/api/notes/\(id)", method: .put, headers: fields, body: ByteBuffer(string: json))
            }
            let unconditional = try await put("a", #"{"id":"a","v":2}"#, [:])
            #expect(unconditional.status == .preconditionRequired)
            #expect(unconditional.text.contains("precondition-required"))
            #expect(try await put("a", #"{"id":"a","v":2}"#, [.ifMatch: tag]).status == .ok)
            let stale = try await put("a", #"{"id":"a","v":3}"#, [.ifMatch: tag])
            #expect(stale.status == .preconditionFailed)
            #expect(stale.header("Content-Type") == "application/problem+json")
            #expect(stale.text.contains(#""record":{"id":"a","v":2}"#))
            #expect(stale.header("ETag") != tag)
            #expect(try await put("a", #"{"id":"a","v":3}"#, [.ifNoneMatch: "*"]).status == .preconditionFailed)
            #expect(try await put("c", #"{"id":"c"}"#, [.ifNoneMatch: "*"]).status == .ok)
            let deleted = try await client.execute(uri: "/api/notes/c", method: .delete, headers: [.authorization: "Bearer \(clientKey)", .ifMatch: "*"])
            #expect(deleted.status == .ok)
            let forbidden = try await client.execute(
                uri: "/api/w/c", method: .put, headers: [.authorization: "Bearer \(clientKey)", .contentType: "application/json", .ifMatch: "*"],
                body: ByteBuffer(string: #"{"id":"c"}"#))
            #expect(forbidden.status == .forbidden)
            // The owner writes unconditionally, and may use If-Match too.
            #expect(try await client.write(.put, "/api/notes/a", #"{"id":"a","v":4}"#).status == .ok)
            #expect(
                try await client.execute(
                    uri: "/api/notes/a", method: .put, headers: [.authorization: "Bearer \(secret)", .contentType: "application/json", .ifMatch: tag],
                    body: ByteBuffer(string: #"{"id":"a","v":5}"#)
                ).status == .preconditionFailed)
        }
    }
}

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

@Suite("Writes: auth, limits, bad input")
struct WriteAPITests {
    @Test("Writes need the bearer secret; without one configured the server is read-only", arguments: Transport.allCases, Backend.available)
    func auth(transport: Transport, backend: Backend) async throws {
        try await withServer(transport, backend: backend) { client, _ in
            let missing = try await client.write(.put, "/api/w/a", #"{"id":"a"}"#, auth: nil)
            #expect(missing.status == .unauthorized)
            #expect(missing.header("WWW-Authenticate") == #"Bearer realm="deltasnap""#)
            #expect(missing.header("Content-Type") == "application/problem+json")
            for wrong in ["Bearer wrong", "Bearer \(secret)x", "Basic \(secret)", "Bearer", secret] {
                #expect(try await client.write(.put, "/api/w/a", #"{"id":"a"}"#, auth: wrong).status == .unauthorized, "\(wrong)")
            }
            #expect(try await client.write(.put, "/api/w/a", #"{"id":"a"}"#, auth: "bearer \(secret)").status == .ok)
            #expect(try await client.get("/api/w").status == .ok)
        }
        try await withServer(transport, backend: backend, configure: { $0.writeToken = nil }) { client, _ in
            let refused = try await client.write(.put, "/api/w/a", #"{"id":"a"}"#)
            #expect(refused.status == .forbidden)
            #expect(refused.text.contains("read-only"))
        }
    }

    @Test("Bodies over the limit get 413, by Content-Length or while streaming", arguments: Transport.allCases, Backend.available)
    func sizeLimit(transport: Transport, backend: Backend) async throws {
        try await withServer(transport, backend: backend, configure: { $0.maximumBodyBytes = 4_096 }) { client, _ in
            let big = #"[{"id":"a","x":""# + String(repeating: "x", count: 5_000) + #""}]"#
            let response = try await client.write(.post, "/api/w", big)
            #expect(response.status == .contentTooLarge)
            #expect(response.header("Content-Type") == "application/problem+json")
            #expect(response.text.contains("too-large"))
            #expect(try await client.write(.post, "/api/w", #"[{"id":"a"}]"#).status == .ok)
        }
    }

    @Test("Bad writes get 4xx problems that say what is wrong, and change nothing", arguments: Transport.allCases, Backend.available)
    func badInput(transport: Transport, backend: Backend) async throws {
        try await withServer(transport, backend: backend) { client, store in
            _ = try await client.write(.put, "/api/w/a", #"{"id":"a","v":1}"#)
            let cases: [(HTTPRequest.Method, String, String, Int, String)] = [
                (.put, "/api/w/a", "[1]", 400, "record: must be a JSON object (found an array)"),
                (.put, "/api/w/a", #"{"v":1}"#, 400, #"record: missing the \"id\" member"#),
                (.put, "/api/w/a", #"{"id":5}"#, 400, #"record: \"id\" must be a string (found a number)"#),
                (.put, "/api/w/a", #"{"id":"b"}"#, 400, #"record: the body's \"id\" differs from the path (body \"b\", path \"a\")"#),
                (.put, "/api/w/a", #"{"id":"a",}"#, 400, "JSON: expected a string key (at byte 10)"),
                (.put, "/api/w/a", #"{"id":"a","hidden":"yes"}"#, 400, #"record: \"hidden\" must be true or false"#),
                (.put, "/api/bad%2Fname/a", #"{"id":"a"}"#, 400, "collection name:"),
                (.post, "/api/w", #"{"id":"a"}"#, 400, "batch: the body must be a JSON array of records"),
                (.post, "/api/w", #"[{"id":"a","v":2},{"id":"a","v":3}]"#, 400, #"record \"a\" in w: written twice in one commit"#),
                (.post, "/api/w", #"[{"id":"c"},7]"#, 400, "record: must be a JSON object (record 2 at byte 12, found a number)"),
                (.delete, "/api/w/zzz", "", 404, #"record \"zzz\" in w: does not exist"#),
            ]
            for (method, path, body, status, detail) in cases {
                let response = try await client.write(method, path, body)
                #expect(response.status.code == status, "\(method) \(path) \(body): \(response.text)")
                #expect(response.header("Content-Type") == "application/problem+json")
                #expect(response.text.contains(detail), "\(response.text)")
            }
            for (type, accepted) in [
                ("application/x-www-form-urlencoded", false), ("application/jsonx", false), ("application/json-patch+json", false),
                ("Application/JSON; charset=utf-8", true), ("application/json ;charset=UTF-8", true),
            ] {
                let answer = try await client.execute(
                    uri: "/api/w/a", method: .put, headers: [.authorization: "Bearer \(secret)", .contentType: type],
                    body: ByteBuffer(string: #"{"id":"a","v":1}"#))
                #expect(answer.status == (accepted ? .ok : .unsupportedMediaType), "\(type)")
            }
            #expect(try await store.headPosition() == 1)
            #expect(try await client.get("/api/w").text == #"{"w":[{"id":"a","v":1}]}"#)
        }
    }

    @Test("A POST batch is one commit; unchanged records take no position", arguments: Transport.allCases, Backend.available)
    func batch(transport: Transport, backend: Backend) async throws {
        try await withServer(transport, backend: backend) { client, store in
            let first = try await client.write(.post, "/api/w", #"[{"id":"a"},{"id":"b","hidden":true},{"id":"c"}]"#)
            let summary = try JSONValue(parsing: first.bytes)
            #expect(summary["committed"] == .bool(true) && summary["upserted"] == .number("2") && summary["hidden"] == .number("1"))
            #expect(summary["position"] == .number("1"))
            #expect(first.header("Cache-Control") == "no-store")
            let again = try JSONValue(parsing: try await client.write(.post, "/api/w", #"[{"id":"a"},{"id":"c"}]"#).bytes)
            #expect(again["committed"] == .bool(false) && again["unchanged"] == .number("2"))
            #expect(try await store.headPosition() == 1)
        }
    }

    @Test("Record ids with spaces, slashes and non-ASCII travel through the path percent-encoded", arguments: Transport.allCases, Backend.available)
    func pathIDs(transport: Transport, backend: Backend) async throws {
        try await withServer(transport, backend: backend) { client, _ in
            #expect(try await client.write(.put, "/api/w/a%20b%C3%A9", #"{"id":"a bé"}"#).status == .ok)
            #expect(try await client.get("/api/w").text == #"{"w":[{"id":"a bé"}]}"#)
            let hidden = try await client.execute(uri: "/api/w/a%20b%C3%A9", method: .delete, headers: [.authorization: "Bearer \(secret)"])
            #expect(hidden.status == .ok)
        }
    }

    @Test("/healthz answers with the head position; /metrics counts requests in Prometheus text", arguments: Transport.allCases, Backend.available)
    func operations(transport: Transport, backend: Backend) async throws {
        try await withServer(transport, backend: backend) { client, _ in
            _ = try await client.write(.post, "/api/w", #"[{"id":"a"},{"id":"b"}]"#)
            let etag = try #require(try await client.get("/api/w").header("ETag"))
            _ = try await client.get("/api/w", [.ifNoneMatch: etag])
            _ = try await client.get("/api/w", [.ifNoneMatch: "junk"])
            let health = try await client.get("/healthz")
            #expect(health.status == .ok)
            #expect(health.text == "{\"position\":1,\"status\":\"ok\"}\n")
            let metrics = try await client.get("/metrics")
            #expect(metrics.header("Content-Type") == "text/plain; version=0.0.4")
            let text = metrics.text
            #expect(text.contains(#"deltasnap_http_requests_total{route="/api/{collection}",method="GET",status="200"} 1"#))
            #expect(text.contains(#"deltasnap_http_requests_total{route="/api/{collection}",method="GET",status="304"} 1"#))
            #expect(text.contains(#"deltasnap_http_requests_total{route="/api/{collection}",method="GET",status="409"} 1"#))
            #expect(text.contains(#"deltasnap_http_requests_total{route="/api/{collection}",method="POST",status="200"} 1"#))
            #expect(text.contains("deltasnap_head_position 1.0\n"))
            #expect(text.contains("deltasnap_full_records_count 1"))
        }
    }
}

import DeltaTestSupport
import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
import Testing

@testable import DeltaServer

@Suite("304 before the HTTP decoder")
struct RawFastPathTests {
    /// A loopback server on `backend` whose collection `w` holds one record: `body` gets its
    /// client, its port (for raw bytes) and the collection's current `ETag`.
    private func withRecord(
        _ backend: Backend, configure: @escaping (inout ServerConfiguration) -> Void = { _ in },
        _ body: @escaping @Sendable (any TestClientProtocol, Int, String) async throws -> Void
    ) async throws {
        try await withServer(.loopback, backend: backend, configure: configure) { client, _ in
            let port = try #require(client.port)
            _ = try await client.write(.put, "/api/w/a", #"{"id":"a"}"#)
            try await body(client, port, try #require(try await client.get("/api/w").header("ETag")))
        }
    }

    private func parse(_ text: String, limit: Int = 8192) -> RawRequest.Parse {
        Array(text.utf8).withUnsafeBytes { RawRequest.parse($0, limit: limit) }
    }

    @Test("Only a whole, plain conditional GET is read; everything else is left to the decoder")
    func parsing() {
        let plain = "GET /api/items HTTP/1.1\r\nHost: x\r\nif-none-match:  W/\"t\" \r\n\r\n"
        #expect(parse(plain) == .request(RawRequest(collection: "items", ifNoneMatch: "W/\"t\"", ifModifiedSince: nil), length: plain.utf8.count))
        #expect(
            parse(plain + "GET /api/other") == .request(RawRequest(collection: "items", ifNoneMatch: "W/\"t\"", ifModifiedSince: nil), length: plain.utf8.count)
        )
        for cut in [1, 5, 9, 20, plain.utf8.count - 2, plain.utf8.count - 1] {
            #expect(parse(String(decoding: plain.utf8.prefix(cut), as: UTF8.self)) == .incomplete, "cut at \(cut)")
        }
        let since = "GET /api/a HTTP/1.1\r\nIf-Modified-Since: Thu, 01 Jan 1970 00:00:07 GMT\r\nConnection: keep-alive\r\n\r\n"
        #expect(
            parse(since) == .request(RawRequest(collection: "a", ifNoneMatch: nil, ifModifiedSince: "Thu, 01 Jan 1970 00:00:07 GMT"), length: since.utf8.count))
        let others = [
            "POST /api/items HTTP/1.1\r\n\r\n", "GET /healthz HTTP/1.1\r\n\r\n", "get /api/items HTTP/1.1\r\n\r\n",
            "GET /api/items HTTP/1.0\r\n\r\n", "GET /api/items HTTP/1.1\nHost: x\n\n", "GET /api/items HTTP/1.1\r\nHost: x\n\r\n",
            "GET /api/items HTTP/1.1\r\nContent-Length: 0\r\n\r\n", "GET /api/items HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n",
            "GET /api/items HTTP/1.1\r\nConnection: close\r\n\r\n", "GET /api/items HTTP/1.1\r\nUpgrade: websocket\r\n\r\n",
            "GET /api/items HTTP/1.1\r\nIf-None-Match: a\r\nIf-None-Match: b\r\n\r\n", "GET /api/items HTTP/1.1\r\n folded\r\n\r\n",
            "GET /api/items HTTP/1.1\r\nBad Name: x\r\n\r\n", "GET /api/items HTTP/1.1\r\nX: a\u{1}b\r\n\r\n", "GET /api/it ems HTTP/1.1\r\n\r\n",
            "GET /api/items HTTP/1.1\r\nNoColon\r\n\r\n", "\r\nGET /api/items HTTP/1.1\r\n\r\n",
            "GET /api/items HTTP/1.1\r\nIf-None-Match: W/\"t\"\r\nDelta-Client: app-1\r\n\r\n",
        ]
        for text in others { #expect(parse(text) == .other, "\(text.debugDescription)") }
        #expect(parse("GET /api/items HTTP/1.1\r\nX: " + String(repeating: "y", count: 9000)) == .other)
        #expect(parse("GET /api/items HTTP/1.1\r\n" + (0..<101).map { "X\($0): y\r\n" }.joined() + "\r\n") == .other)
    }

    @Test(
        "A conditional GET that names its client (Delta-Client) on a fresh connection is left to the router, which adds Delta-Last-Mutation",
        arguments: Backend.available)
    func writingClientsAreRouted(backend: Backend) async throws {
        try await withServer(
            .loopback, backend: backend,
            configure: {
                $0.clientKey = "client-key-456"
                $0.clientWritable = ["w"]
            }
        ) { client, _ in
            let port = try #require(client.port)
            _ = try await client.write(.put, "/api/w/a", #"{"id":"a"}"#)
            let etag = try #require(try await client.get("/api/w").header("ETag"))
            let before = try await earlyCount(client)
            let answer = try await rawExchange(port: port, "GET /api/w HTTP/1.1\r\nHost: 127.0.0.1\r\nIf-None-Match: \(etag)\r\nDelta-Client: app-1\r\n\r\n") {
                $0.hasSuffix("\r\n\r\n")
            }
            #expect(answer.hasPrefix("HTTP/1.1 304"))
            #expect(answer.contains("Delta-Last-Mutation: 0\r\n"))
            #expect(try await earlyCount(client) == before)
        }
    }

    /// The `deltasnap_early_not_modified` counter from `/metrics`.
    private func earlyCount(_ client: any TestClientProtocol) async throws -> Int {
        try await client.metric("deltasnap_early_not_modified_responses")
    }

    @Test("A 304 from before the decoder is byte for byte the router's, but for the date; requests cut into pieces are answered", arguments: Backend.available)
    func sameBytes(backend: Backend) async throws {
        try await withRecord(backend) { client, port, etag in
            let request = Array("GET /api/w HTTP/1.1\r\nHost: 127.0.0.1\r\nIf-None-Match: \(etag)\r\n\r\n".utf8)
            let pieces = stride(from: 0, to: request.count, by: 7).map { Array(request[$0..<min(request.count, $0 + 7)]) }
            #expect(try await earlyCount(client) == 0)
            let early = try await rawExchange(port: port, pieces: pieces) { $0.hasSuffix("\r\n\r\n") }
            _ = try await rawExchange(port: port, String(decoding: request, as: UTF8.self)) { $0.hasSuffix("\r\n\r\n") }
            // Connection: close is left to the router.
            let routed = try await rawExchange(port: port, "GET /api/w HTTP/1.1\r\nHost: 127.0.0.1\r\nIf-None-Match: \(etag)\r\nConnection: close\r\n\r\n") {
                $0.hasSuffix("\r\n\r\n")
            }
            func withoutDate(_ text: String) -> String {
                text.components(separatedBy: "\r\n").filter { !$0.hasPrefix("Date: ") }.joined(separator: "\r\n")
            }
            #expect(try await earlyCount(client) == 2)
            #expect(early.hasPrefix("HTTP/1.1 304 Not Modified\r\nCache-Control: no-store\r\n"))
            #expect(early.contains("\r\nDate: "))
            #expect(withoutDate(early) == withoutDate(routed))
        }
    }

    @Test(
        "One connection: answered early, then a write with a body goes to the decoder, and what follows it too, in order; bare LF is the decoder's to refuse",
        arguments: Backend.available)
    func mixedConnection(backend: Backend) async throws {
        try await withRecord(backend) { client, port, etag in
            let body = #"{"id":"a","v":2}"#
            let conditional = "GET /api/w HTTP/1.1\r\nHost: x\r\nIf-None-Match: \(etag)\r\n\r\n"
            let requests = [
                conditional, conditional,
                "PUT /api/w/a HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(secret)\r\nContent-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)",
                conditional,
            ]
            let answer = try await rawExchange(port: port, pieces: requests.map { Array($0.utf8) }) { text in
                text.components(separatedBy: "HTTP/1.1 ").count == 5 && text.contains(#""v":2"#)
            }
            // A body without a final newline runs straight into the next status line.
            let statuses = answer.components(separatedBy: "HTTP/1.1 ").dropFirst().map { String($0.prefix(3)) }
            #expect(statuses == ["304", "304", "200", "200"])
            #expect(answer.contains("Delta-Mode: delta"))
            // Bare LF never completes a header block here: without the hand-over it would wait forever.
            let bare = try await rawExchange(port: port, "GET /api/w HTTP/1.1\nHost: x\nIf-None-Match: \(etag)\n\n") { $0.contains("\r\n\r\n") }
            #expect(bare.hasPrefix("HTTP/1.1 400 Bad Request\r\n"))
        }
    }

    @Test("Early 304s are counted by method, as the router counts them, though one connection keeps its counter", arguments: Backend.available)
    func countedByMethod(backend: Backend) async throws {
        try await withRecord(backend) { client, port, etag in
            func count(_ method: String) async throws -> Int {
                try await client.metric(#"deltasnap_http_requests_total{route="/api/{collection}",method="\#(method)",status="304"}"#)
            }
            let (gets, heads) = (try await count("GET"), try await count("HEAD"))
            let requests = ["GET", "HEAD", "HEAD", "GET", "GET"].map { "\($0) /api/w HTTP/1.1\r\nHost: x\r\nIf-None-Match: \(etag)\r\n\r\n" }
            let answer = try await rawExchange(port: port, pieces: requests.map { Array($0.utf8) }) { $0.components(separatedBy: "HTTP/1.1 304").count == 6 }
            #expect(answer.components(separatedBy: "HTTP/1.1 304").count == 6)
            #expect(try await count("GET") == gets + 3)
            #expect(try await count("HEAD") == heads + 2)
        }
    }

    @Test(
        "On a connection handed to the decoder (a Connection option the raw reader does not take), 304s are answered after decoding, each with its own token, and counted",
        arguments: Backend.available)
    func afterDecoding(backend: Backend) async throws {
        try await withRecord(backend) { client, port, w in
            _ = try await client.write(.put, "/api/v/a", #"{"id":"a"}"#)
            let v = try #require(try await client.get("/api/v").header("ETag"))
            let counted = try await client.metric(#"deltasnap_http_requests_total{route="/api/{collection}",method="GET",status="304"}"#)
            let asked = [("w", w), ("v", v), ("w", w), ("w", w)]
            let requests = asked.map { "GET /api/\($0.0) HTTP/1.1\r\nHost: x\r\nConnection: keep-alive, x\r\nIf-None-Match: \($0.1)\r\n\r\n" }
            let answer = try await rawExchange(port: port, pieces: requests.map { Array($0.utf8) }) { $0.components(separatedBy: "HTTP/1.1 304").count == 5 }
            let lines = answer.components(separatedBy: "\r\n").filter { $0.hasPrefix("ETag: ") || $0.hasPrefix("HTTP/1.1 ") }
            #expect(lines == asked.flatMap { ["HTTP/1.1 304 Not Modified", "ETag: \($0.1)"] })
            #expect(try await client.metric(#"deltasnap_http_requests_total{route="/api/{collection}",method="GET",status="304"}"#) == counted + 4)
        }
    }

    @Test(
        "A live client's wait refused for a full room (503 too-many-waiting) is answered at once from the raw path, after a database round trip too",
        arguments: Backend.available)
    func fullRoomAnswersAtOnce(backend: Backend) async throws {
        try await withRecord(backend, configure: { $0.maximumWaiting = 0 }) { _, port, etag in
            let started = ContinuousClock.now
            let answer = try await rawExchange(port: port, "GET /api/w?wait=5 HTTP/1.1\r\nHost: x\r\nIf-None-Match: \(etag)\r\n\r\n") {
                $0.contains("too-many-waiting")
            }
            #expect(answer.hasPrefix("HTTP/1.1 503 Service Unavailable\r\n"))
            // Without its cycle ended, the answer came only when the client's 60 s read timed out; a loaded
            // machine (the whole suite on two cores) has taken 8 to 10 s to answer it.
            #expect(ContinuousClock.now - started < .seconds(30), "answered at once, not at the end of the connection")
        }
    }
}

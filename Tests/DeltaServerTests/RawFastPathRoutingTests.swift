import DeltaCore
import DeltaTestSupport
import Foundation
import HTTPTypes
import HummingbirdTesting
import Testing

@Suite("The raw path takes a connection back after a request it sent to the router")
struct RawFastPathRoutingTests {
    /// A request that goes to the router (no validator), and a revalidation it could answer.
    private static func requests(_ etag: String) -> (full: String, conditional: String) {
        ("GET /api/w HTTP/1.1\r\nHost: x\r\n\r\n", "GET /api/w HTTP/1.1\r\nHost: x\r\nIf-None-Match: \(etag)\r\n\r\n")
    }

    /// Runs `body` with a server on `backend` whose collection `w` holds the record `a`, its
    /// port, and the two requests for `w` with that record's validator.
    private static func withOneRecord(
        _ backend: Backend, _ body: @escaping @Sendable (any TestClientProtocol, Int, _ full: String, _ conditional: String) async throws -> Void
    ) async throws {
        try await withServer(.loopback, backend: backend) { client, _ in
            let port = try #require(client.port)
            _ = try await client.write(.put, "/api/w/a", #"{"id":"a"}"#)
            let (full, conditional) = requests(try #require(try await client.get("/api/w").header("ETag")))
            try await body(client, port, full, conditional)
        }
    }

    /// The status codes of `answer`'s responses, in order. A status line may follow a body with no
    /// line break (a body framed by `Content-Length`, such as a kept answer's, ends where it ends).
    private static func statuses(_ answer: String) -> [String] {
        answer.matches(of: /HTTP\/1\.1 (\d{3}) [A-Z]/).map { String($0.output.1) }
    }

    @Test(
        "After a download or a delta on a connection, its revalidations are answered before the decoder again, sent apart or pipelined",
        arguments: Backend.available)
    func takenBack(backend: Backend) async throws {
        try await Self.withOneRecord(backend) { client, port, full, conditional in
            let before: Int = try await client.metric("deltasnap_early_not_modified_responses")
            // Apart: the revalidations arrive after the download's answer was sent.
            let apart = try await rawExchange(port: port, pieces: [full, conditional, conditional].map { Array($0.utf8) }) {
                $0.components(separatedBy: "HTTP/1.1 304").count == 3
            }
            #expect(Self.statuses(apart) == ["200", "304", "304"])
            // Pipelined: they wait behind the download, and its body comes first.
            let pipelined = try await rawExchange(port: port, full + conditional + conditional) {
                $0.components(separatedBy: "HTTP/1.1 304").count == 3
            }
            #expect(Self.statuses(pipelined) == ["200", "304", "304"])
            #expect(pipelined.range(of: #""id":"a""#)!.lowerBound < pipelined.range(of: "HTTP/1.1 304")!.lowerBound)
            // A delta (a validator one write old; on PostgreSQL, after asking the database), then a
            // revalidation with the validator it brought.
            _ = try await client.write(.put, "/api/w/b", #"{"id":"b"}"#)
            let (_, current) = Self.requests(try #require(try await client.get("/api/w").header("ETag")))
            let delta = try await rawExchange(port: port, pieces: [conditional, current].map { Array($0.utf8) }) {
                $0.contains("HTTP/1.1 304")
            }
            #expect(Self.statuses(delta) == ["200", "304"])
            #expect(delta.contains("Delta-Mode: delta") && delta.contains(#""id":"b""#))
            #expect(try await client.metric("deltasnap_early_not_modified_responses") == before + 5)
        }
    }

    @Test(
        "More than a header block's worth waiting behind a routed request, or the client's input ending, hands the connection to the decoder: every request answered, in order",
        arguments: Backend.available)
    func handedOver(backend: Backend) async throws {
        try await Self.withOneRecord(backend) { _, port, full, conditional in
            let many = 120  // about 70 bytes each: past the 8 KiB that may wait
            let crowded = try await rawExchange(port: port, full + String(repeating: conditional, count: many)) {
                $0.components(separatedBy: "HTTP/1.1 304").count == many + 1
            }
            #expect(Self.statuses(crowded) == ["200"] + Array(repeating: "304", count: many))
            let closed = try await rawExchange(port: port, pieces: [Array((full + conditional).utf8)], halfClose: true) {
                $0.components(separatedBy: "HTTP/1.1 304").count == 2
            }
            #expect(Self.statuses(closed) == ["200", "304"])
            // The input ends inside a request (on PostgreSQL, while the one before it is asked
            // about): the answer first, then the decoder's 400 for the cut request.
            let cut = try await rawExchange(port: port, pieces: [Array((conditional + "GET /api/w HTTP/1.1\r\nHo").utf8)], halfClose: true) {
                $0.components(separatedBy: "HTTP/1.1 ").count == 3
            }
            #expect(Self.statuses(cut) == ["304", "400"])
        }
    }
}

extension RawFastPathRoutingTests {
    @Test("On PostgreSQL, a connection repeating an old token asks the database about it once, then sends it to the router unasked")
    func changedRemembered() async throws {
        guard Backend.available.contains(.postgres) else { return }
        try await Self.withOneRecord(.postgres) { client, port, _, old in
            _ = try await client.write(.put, "/api/w/b", #"{"id":"b"}"#)
            let (_, current) = Self.requests(try #require(try await client.get("/api/w").header("ETag")))
            let before: Int = try await client.metric("deltasnap_early_round_trips_total")
            let answer = try await rawExchange(port: port, pieces: [old, old, old, current].map { Array($0.utf8) }) {
                $0.contains("HTTP/1.1 304")
            }
            #expect(Self.statuses(answer) == ["200", "200", "200", "304"])
            // The old token once, the current one once (another request: it is asked).
            #expect(try await client.metric("deltasnap_early_round_trips_total") == before + 2)
        }
    }
}

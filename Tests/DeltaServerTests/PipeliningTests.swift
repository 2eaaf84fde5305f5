import DeltaCore
import DeltaTestSupport
import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
import Testing

/// Sends raw bytes on one TCP connection and reads until `complete` says the answer is whole.
func rawExchange(port: Int, _ request: String, until complete: @escaping @Sendable (String) -> Bool) async throws -> String {
    try await rawExchange(port: port, pieces: [Array(request.utf8)], until: complete)
}

/// Sends `pieces` one `send` at a time (a short pause between them, so that the server reads them
/// separately), then, with `halfClose`, ends its side of the connection (`shutdown(SHUT_WR)`), then
/// reads until `complete` says the answer is whole. The blocking socket calls run on a thread of
/// their own: on the cooperative pool they could starve the server under test.
func rawExchange(
    port: Int, pieces: [[UInt8]], halfClose: Bool = false, until complete: @escaping @Sendable (String) -> Bool
) async throws -> String {
    try await offThePool { try blockingExchange(port: port, pieces: pieces, halfClose: halfClose, until: complete) }
}

private func blockingExchange(port: Int, pieces: [[UInt8]], halfClose: Bool, until complete: (String) -> Bool) throws -> String {
    let fd = try connectLoopback(port: port)
    defer { close(fd) }
    // Generous: on two loaded cores the in-process server once took over 10 s to answer (HostileInputTests).
    var timeout = timeval(tv_sec: 60, tv_usec: 0)
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    for (index, piece) in pieces.enumerated() {
        if index > 0 { usleep(2_000) }
        guard send(fd, piece, piece.count, 0) == piece.count else { throw TestFailure("send() failed") }
    }
    if halfClose { shutdown(fd, Int32(SHUT_WR)) }
    var received: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 65_536)
    while !complete(String(decoding: received, as: UTF8.self)) {
        let count = recv(fd, &buffer, buffer.count, 0)
        guard count > 0 else { break }
        received.append(contentsOf: buffer[0..<count])
    }
    return String(decoding: received, as: UTF8.self)
}

@Suite("HTTP/1.1 pipelining")
struct PipeliningTests {
    @Test("Pipelined requests are answered in order, also when a later one could be answered at once", arguments: Backend.available)
    func order(backend: Backend) async throws {
        try await withServer(.loopback, backend: backend) { client, _ in
            let port = try #require(client.port)
            let batch = (0..<3_000).map { #"{"id":"r\#($0)","text":"padding padding padding \#($0)"}"# }.joined(separator: ",")
            _ = try await client.write(.post, "/api/big", "[\(batch)]")
            _ = try await client.write(.put, "/api/small/a", #"{"id":"a"}"#)
            let etag = try #require(try await client.get("/api/small").header("ETag"))
            let request =
                "GET /api/big HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
                + "GET /api/small HTTP/1.1\r\nHost: 127.0.0.1\r\nIf-None-Match: \(etag)\r\n\r\n"
                + "GET /api/small HTTP/1.1\r\nHost: 127.0.0.1\r\nIf-None-Match: \(etag)\r\n\r\n"
            let answer = try await rawExchange(port: port, request) { text in
                text.components(separatedBy: "HTTP/1.1 304 Not Modified").count == 3
            }
            let statuses = answer.components(separatedBy: "\r\n").filter { $0.hasPrefix("HTTP/1.1 ") }
            #expect(statuses == ["HTTP/1.1 200 OK", "HTTP/1.1 304 Not Modified", "HTTP/1.1 304 Not Modified"])
            #expect(answer.contains("\"r2999\""))
            #expect(answer.range(of: "\"r2999\"")!.lowerBound < answer.range(of: "304 Not Modified")!.lowerBound)
        }
    }

    @Test("A 304 answered before the router carries exactly the router's headers", arguments: ["If-None-Match", "If-Modified-Since"])
    func sameHeaders(header: String) async throws {
        let names = [HTTPField.Name.cacheControl, .vary, .lastModified, .contentType, .contentEncoding]
        var seen: [[String?]] = []
        for transport in Transport.allCases {
            let values = try await withServer(transport) { client, _ in
                _ = try await client.write(.put, "/api/w/a", #"{"id":"a"}"#)
                let full = try await client.get("/api/w")
                let validator = header == "If-None-Match" ? full.headers[.eTag]! : full.headers[.lastModified]!
                let reply = try await client.get("/api/w", [HTTPField.Name(header)!: validator])
                #expect(reply.status == .notModified)
                #expect(reply.body.readableBytes == 0)
                if transport == .loopback { #expect(reply.headers[.date] != nil) }
                #expect(reply.headers[.eTag] == full.headers[.eTag])
                return names.map { reply.headers[$0] }
            }
            seen.append(values)
        }
        #expect(seen[0] == seen[1])
    }
}

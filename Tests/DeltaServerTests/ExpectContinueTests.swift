import DeltaCore
import DeltaTestSupport
import Foundation
import HummingbirdTesting
import Testing

@Suite("Expect: 100-continue")
struct ExpectContinueTests {
    @Test("A body that waits for 100 Continue gets it at once, and after any answer before it on the connection", arguments: Backend.available)
    func continues(backend: Backend) async throws {
        try await withServer(.loopback, backend: backend) { client, _ in
            let port = try #require(client.port)
            let (bytes, hash) = BlobRouteTests.bytes(2_000, seed: 31)
            let head =
                "PUT /blobs/\(hash.hex) HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(secret)\r\n"
                + "Content-Type: image/png\r\nContent-Length: 2000\r\nExpect: 100-continue\r\n\r\n"
            // Only the head: the server says to go on, and waits for the body.
            let waiting = try await rawExchange(port: port, head) { $0.hasSuffix("\r\n\r\n") }
            #expect(waiting == "HTTP/1.1 100 Continue\r\n\r\n")
            // After a pipelined GET: its whole answer first, then the 100, then the PUT's answer.
            let answer = try await rawExchange(
                port: port, pieces: [Array(("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n" + head).utf8), bytes]
            ) { $0.contains(#""$blob""#) }
            // Status lines, wherever they start (a JSON body ends in a bare newline).
            let statuses = answer.components(separatedBy: "HTTP/1.1 ").dropFirst().map { "HTTP/1.1 " + $0.prefix { $0 != "\r\n" } }
            #expect(statuses == ["HTTP/1.1 200 OK", "HTTP/1.1 100 Continue", "HTTP/1.1 200 OK"], "\(answer.debugDescription)")
            #expect(answer.hasSuffix(#"{"$blob":"\#(hash.hex)","size":2000,"type":"image/png"}"# + "\n"))
        }
    }
}

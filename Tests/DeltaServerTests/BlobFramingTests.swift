import DeltaCore
import DeltaServer
import DeltaStore
import DeltaTestSupport
import Foundation
import HTTPTypes
import HummingbirdTesting
import Testing

@Suite("Blob uploads whose framing lies: a clear answer or a closed connection, nothing stored")
struct BlobFramingTests {
    @Test("Content-Length over the bytes sent (the client goes away), or under them (the rest is not a request)", arguments: Backend.available)
    func wrongLength(backend: Backend) async throws {
        try await withServer(.loopback, backend: backend) { client, store in
            let port = try #require(client.port)
            let (bytes, hash) = BlobRouteTests.bytes(4_000, seed: 61)
            func head(_ length: Int) -> String {
                "PUT /blobs/\(hash.hex) HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(secret)\r\nContent-Length: \(length)\r\n\r\n"
            }
            // Says 4,000, sends 1,000, then closes: the upload is dropped.
            let short = try await rawExchange(port: port, pieces: [Array(head(4_000).utf8), Array(bytes.prefix(1_000))]) { _ in true }
            #expect(!short.contains("200 OK"), "\(short)")
            // Says 1,000 of the 4,000: those bytes are not the blob (422); what follows is not HTTP (400, closed).
            let long = try await rawExchange(port: port, pieces: [Array(head(1_000).utf8) + bytes]) { $0.contains("Connection: close") || $0.count > 2_000 }
            let statuses = ("\n" + long).components(separatedBy: "\nHTTP/1.1 ").dropFirst().map { String($0.prefix(3)) }
            #expect(statuses == ["422", "400"], "\(long)")
            // A chunked body with a bad chunk size: refused at once, nothing stored.
            let chunked = "PUT /blobs/\(hash.hex) HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(secret)\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"
            let started = ContinuousClock.now
            let bad = try await rawExchange(port: port, chunked) { _ in false }  // read until the server closes
            #expect(bad.hasPrefix("HTTP/1.1 400 Bad Request\r\n") && bad.contains("urn:deltasnap:problem:malformed-request"), "\(bad)")
            #expect(("\n" + bad).components(separatedBy: "\nHTTP/1.1 ").count == 2, "one answer, then the connection closes: \(bad)")
            // The test server's idle timeout is 600 s: far above this bound, however loaded the machine.
            #expect(ContinuousClock.now - started < .seconds(60), "the server held a broken upload until its idle timeout")
            try await Task.sleep(for: .milliseconds(200))
            #expect(try await store.blob(hash) == nil)
            let totals = try await store.blobTotals()
            #expect(totals.blobs == 0)
            // The server still takes the right bytes.
            #expect(try await BlobRouteTests.upload(client, hash, bytes).status == .ok)
        }
    }
}

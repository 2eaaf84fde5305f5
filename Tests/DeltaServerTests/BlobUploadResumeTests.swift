import DeltaCore
import DeltaServer
import DeltaStore
import DeltaTestSupport
import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
import Testing

@Suite("Uploads cut off resume from the bytes the server kept: HEAD /blobs/{sha256}/upload, then PUT with Upload-Offset")
struct BlobUploadResumeTests {
    static let offsetField = HTTPField.Name("Upload-Offset")!

    @Test(
        "A cut upload keeps its bytes for its credential alone; a wrong offset is 409 with what is kept; the rest from there stores the blob",
        arguments: Backend.available)
    func resumeAfterCut(backend: Backend) async throws {
        try await withServer(.loopback, backend: backend, configure: { $0.clientKey = clientKey }) { client, store in
            let port = try #require(client.port)
            let (bytes, hash) = BlobRouteTests.bytes((3 << 20) + 300_000, seed: 71)
            let sent = (2 << 20) + 100_000
            let head = "PUT /blobs/\(hash.hex) HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(secret)\r\nContent-Length: \(bytes.count)\r\n\r\n"
            _ = try await rawExchange(port: port, pieces: [Array(head.utf8), Array(bytes.prefix(sent))]) { _ in true }
            // The embedded store keeps every byte received; PostgreSQL keeps whole 1 MiB parts.
            let expected = backend == .sqlite ? sent : 2 << 20
            let kept = try await Self.keptOnceCut(client, hash)
            #expect(kept == expected)
            // Kept for the owner only: apps (the client key) have nothing kept, and no credential is 401.
            #expect(try await Self.kept(client, hash, auth: "Bearer \(clientKey)") == 0)
            let anonymous = try await client.execute(uri: "/blobs/\(hash.hex)/upload", method: .head)
            #expect(anonymous.status == .unauthorized)
            #expect(try await store.blob(hash) == nil)

            // An offset the server did not keep: 409 with the kept size, nothing changed.
            let wrong = try await Self.resume(client, hash, Array(bytes[(kept + 1)...]), offset: "\(kept + 1)")
            #expect(wrong.status == .conflict && wrong.headers[Self.offsetField] == String(kept))
            #expect(String(buffer: wrong.body).contains("urn:deltasnap:problem:upload-offset"), "\(String(buffer: wrong.body))")
            #expect(try await Self.kept(client, hash) == kept)
            let malformed = try await Self.resume(client, hash, Array(bytes[kept...]), offset: "-1")
            #expect(malformed.status == .badRequest && String(buffer: malformed.body).contains("invalid-upload-offset"))

            // The rest from the kept offset: the blob, whole.
            let resumed = try await Self.resume(client, hash, Array(bytes[kept...]), offset: "\(kept)")
            #expect(resumed.status == .ok, "\(String(buffer: resumed.body))")
            #expect(Array(buffer: resumed.body) == BlobReference(hash: hash, size: Int64(bytes.count), type: "image/png").json.canonicalBytes + [10])
            #expect(try await Self.kept(client, hash) == 0)
            let got = try await client.get("/blobs/\(hash.hex)", [.authorization: "Bearer \(secret)"])
            #expect(got.status == .ok && Array(buffer: got.body) == bytes)
        }
    }

    @Test("A resumed upload whose bytes do not hash to the name is 422 and keeps nothing; an offset past the limit is 413", arguments: Backend.available)
    func resumedWrongBytes(backend: Backend) async throws {
        try await withServer(.loopback, backend: backend, configure: { $0.maximumBlobBytes = 3 << 20 }) { client, store in
            let port = try #require(client.port)
            let (bytes, hash) = BlobRouteTests.bytes((2 << 20) + 10, seed: 72)
            let head = "PUT /blobs/\(hash.hex) HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(secret)\r\nContent-Length: \(bytes.count)\r\n\r\n"
            _ = try await rawExchange(port: port, pieces: [Array(head.utf8), Array(bytes.prefix(1 << 20))]) { _ in true }
            let kept = try await Self.keptOnceCut(client, hash)
            #expect(kept == 1 << 20)
            let tooLarge = try await Self.resume(client, hash, [UInt8](repeating: 1, count: (2 << 20) + 1), offset: "\(kept)")
            #expect(tooLarge.status == .contentTooLarge)
            #expect(try await Self.kept(client, hash) == kept)
            var other = Array(bytes[kept...])
            other[0] ^= 1
            let refused = try await Self.resume(client, hash, other, offset: "\(kept)")
            #expect(refused.status == .unprocessableContent, "\(String(buffer: refused.body))")
            #expect(try await Self.kept(client, hash) == 0)
            #expect(try await store.blob(hash) == nil)
        }
    }

    /// The bytes kept once the cut upload is suspended (the server notices the closed
    /// connection after the client's side returns): polled for up to 30 s.
    static func keptOnceCut(_ client: some TestClientProtocol, _ hash: BlobHash) async throws -> Int {
        let deadline = ContinuousClock.now + .seconds(30)
        while ContinuousClock.now < deadline {
            let kept = try await Self.kept(client, hash)
            if kept > 0 { return kept }
            try await Task.sleep(for: .milliseconds(20))
        }
        return 0
    }

    /// `HEAD /blobs/{hash}/upload`'s `Upload-Offset`, after checking its form.
    static func kept(_ client: some TestClientProtocol, _ hash: BlobHash, auth: String = "Bearer \(secret)") async throws -> Int {
        let answer = try await client.execute(uri: "/blobs/\(hash.hex)/upload", method: .head, headers: [.authorization: auth])
        #expect(answer.status == .noContent && answer.headers[.cacheControl] == "no-store")
        return try #require(answer.headers[offsetField].flatMap { Int($0) })
    }

    /// `PUT /blobs/{hash}` with `Upload-Offset: offset` and `bytes`, as the owner.
    static func resume(_ client: some TestClientProtocol, _ hash: BlobHash, _ bytes: [UInt8], offset: String) async throws -> TestResponse {
        try await client.execute(
            uri: "/blobs/\(hash.hex)", method: .put,
            headers: [.authorization: "Bearer \(secret)", .contentType: "image/png", offsetField: offset], body: ByteBuffer(bytes: bytes))
    }
}

import DeltaCore
import DeltaServer
import DeltaStore
import DeltaTestSupport
import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
import Testing

@Suite("PUT /blobs with If-None-Match: *: nothing to send when the blob is held for the one asking")
struct BlobConditionalTests {
    static func probe(_ client: some TestClientProtocol, _ hash: BlobHash, auth: String) async throws -> TestResponse {
        try await client.execute(uri: "/blobs/\(hash.hex)", method: .put, headers: [.authorization: auth, .ifNoneMatch: "*"], body: ByteBuffer())
    }

    @Test("Held: 412 before any byte is read; not held, or held but another user's upload: the upload goes on", arguments: Backend.available)
    func conditional(backend: Backend) async throws {
        try await withUserServer(backend: backend, rules: exampleRules) { client, store in
            let ada = try await Mint.hs256("ada")
            let bob = try await Mint.hs256("bob")
            let (bytes, hash) = BlobRouteTests.bytes(10_000, seed: 51)
            // Not held: the empty body is not the blob (422), and nothing is stored.
            #expect(try await Self.probe(client, hash, auth: "Bearer \(ada)").status == .unprocessableContent)
            #expect(try await store.blob(hash) == nil)
            _ = try await BlobRouteTests.upload(client, hash, bytes, auth: "Bearer \(ada)")
            let held = try await Self.probe(client, hash, auth: "Bearer \(ada)")
            #expect(held.status == .preconditionFailed && held.header("ETag") == "\"\(hash.hex)\"", "\(held.text)")
            #expect(held.text.contains("urn:deltasnap:problem:precondition-failed"))
            // Bob did not upload it: he is not told it exists.
            #expect(try await Self.probe(client, hash, auth: "Bearer \(bob)").status == .unprocessableContent)
            // The owner and apps may reference any blob held, so they are told.
            #expect(try await Self.probe(client, hash, auth: "Bearer \(secret)").status == .preconditionFailed)
            #expect(try await Self.probe(client, hash, auth: "Bearer client-key-123").status == .preconditionFailed)
            #expect(try await client.metric("deltasnap_blob_uploads_total") == 1)
        }
    }
}

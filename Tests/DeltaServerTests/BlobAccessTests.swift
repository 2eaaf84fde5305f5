import DeltaCore
import DeltaServer
import DeltaStore
import DeltaTestSupport
import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
import Testing

@Suite("Blobs under rules: read by the rows that reference them, 404 to everyone else, referenced only by who holds the bytes")
struct BlobAccessTests {
    static func reference(_ hash: BlobHash, _ size: Int) -> String { #"{"$blob":"\#(hash.hex)","size":\#(size),"type":"image/jpeg"}"# }

    @Test(
        "Ada's photo: hers to read (private), 404 to Bob, apps and strangers exactly as for no blob; a public row makes it public", arguments: Backend.available
    )
    func readByRule(backend: Backend) async throws {
        try await withUserServer(backend: backend, rules: exampleRules) { client, _ in
            let ada = try await Mint.hs256("ada")
            let bob = try await Mint.hs256("bob")
            let (photo, hash) = BlobRouteTests.bytes(5_000, seed: 11)
            let put = try await BlobRouteTests.upload(client, hash, photo, type: "image/jpeg", auth: "Bearer \(ada)")
            #expect(put.status == .ok, "\(put.text)")
            let note = try await client.execute(
                uri: "/api/notes/n1", method: .put, headers: [.authorization: "Bearer \(ada)", .ifNoneMatch: "*", .contentType: "application/json"],
                body: ByteBuffer(string: #"{"id":"n1","photo":\#(Self.reference(hash, 5_000))}"#))
            #expect(note.status == .ok, "\(note.text)")

            let hers = try await client.get("/blobs/\(hash.hex)", as: ada)
            #expect(hers.status == .ok && hers.bytes == photo)
            #expect(hers.header("Cache-Control") == "private, max-age=31536000, immutable")
            #expect(hers.header("Vary") == "Authorization")
            let ranged = try await client.get("/blobs/\(hash.hex)", as: ada, [.range: "bytes=100-199"])
            #expect(ranged.status == .partialContent && ranged.bytes == Array(photo[100..<200]))

            // Bob, an app, a stranger: the same 404 as a blob that does not exist.
            let nowhere = BlobRouteTests.bytes(10, seed: 12).1
            let absent = try await client.get("/blobs/\(nowhere.hex)", as: bob)
            for (who, response) in [
                ("bob", try await client.get("/blobs/\(hash.hex)", as: bob)),
                ("app", try await client.get("/blobs/\(hash.hex)", as: "client-key-123")),
                ("stranger", try await client.get("/blobs/\(hash.hex)", as: nil)),
                ("bob, HEAD", try await client.execute(uri: "/blobs/\(hash.hex)", method: .head, headers: [.authorization: "Bearer \(bob)"])),
            ] {
                #expect(response.status == .notFound, "\(who)")
                #expect(response.header("ETag") == nil && response.header("Content-Length") != "5000", "\(who)")
                if who != "bob, HEAD" {
                    #expect(response.text.replacingOccurrences(of: hash.hex, with: nowhere.hex) == absent.text, "\(who): \(response.text)")
                }
            }
            // Bob knows the hash but not the bytes: he may not reference it to read it, and
            // the answer is the one for a blob the server does not hold.
            let theft = try await client.execute(
                uri: "/api/notes/b1", method: .put, headers: [.authorization: "Bearer \(bob)", .ifNoneMatch: "*", .contentType: "application/json"],
                body: ByteBuffer(string: #"{"id":"b1","photo":\#(Self.reference(hash, 5_000))}"#))
            let missing = try await client.execute(
                uri: "/api/notes/b2", method: .put, headers: [.authorization: "Bearer \(bob)", .ifNoneMatch: "*", .contentType: "application/json"],
                body: ByteBuffer(string: #"{"id":"b2","photo":\#(Self.reference(nowhere, 10))}"#))
            #expect(theft.status == .conflict && missing.status == .conflict)
            #expect(
                theft.text.replacingOccurrences(of: hash.hex, with: nowhere.hex).replacingOccurrences(of: "b1", with: "b2") == missing.text, "\(theft.text)")
            #expect(try await client.get("/blobs/\(hash.hex)", as: bob).status == .notFound)
            // With the bytes, Bob may: uploading proves he has them.
            #expect(try await BlobRouteTests.upload(client, hash, photo, type: "image/jpeg", auth: "Bearer \(bob)").status == .ok)
            let shared = try await client.execute(
                uri: "/api/notes/b1", method: .put, headers: [.authorization: "Bearer \(bob)", .ifNoneMatch: "*", .contentType: "application/json"],
                body: ByteBuffer(string: #"{"id":"b1","photo":\#(Self.reference(hash, 5_000))}"#))
            #expect(shared.status == .ok, "\(shared.text)")
            #expect(try await client.get("/blobs/\(hash.hex)", as: bob).status == .ok)

            // A public row makes a blob everyone's, and cacheable.
            let (map, mapHash) = BlobRouteTests.bytes(3_000, seed: 13)
            _ = try await BlobRouteTests.upload(client, mapHash, map, type: "image/jpeg")
            _ = try await client.write(.put, "/api/airports/a1", #"{"id":"a1","map":\#(Self.reference(mapHash, 3_000))}"#)
            let open = try await client.get("/blobs/\(mapHash.hex)", as: nil)
            #expect(open.status == .ok && open.bytes == map)
            #expect(open.header("Cache-Control") == "public, max-age=31536000, immutable")
            #expect(open.header("Vary") == nil)
            // Ada deletes her note: Bob's still references the photo, Ada's own gone.
            _ = try await client.execute(uri: "/api/notes/n1", method: .delete, headers: [.authorization: "Bearer \(ada)", .ifMatch: "*"])
            #expect(try await client.get("/blobs/\(hash.hex)", as: ada).status == .notFound)
            #expect(try await client.get("/blobs/\(hash.hex)", as: bob).status == .ok)
        }
    }
}

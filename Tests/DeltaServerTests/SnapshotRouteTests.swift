import DeltaAuthoring
import DeltaCore
import DeltaServer
import DeltaStore
import DeltaTestSupport
import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
import Testing

@Suite("Snapshots by content: /snapshots/{sha256}")
struct SnapshotRouteTests {
    @Test(
        "a snapshot is served by the SHA-256 of its bytes, immutable, with a strong ETag; /snapshots/current/{collection} redirects to the newest; unknown or malformed names get 404 problems"
    )
    func servedByContent() async throws {
        let directory = try makeTemporaryDirectory("snapshots")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try await withServer(.loopback, configure: { $0.snapshotDirectory = directory }) { client, store in
            func bake(_ name: String) async throws -> (bytes: [UInt8], sha256: String) {
                let read = try await store.openFullRead([try CollectionName("widgets")])
                defer { read.close() }
                let entry = read.collections[0]
                let manifest = try SnapshotManifest(collections: [
                    .init(
                        name: entry.name, entityTag: entry.token.entityTag, lastModified: entry.token.lastModified, records: entry.records, digest: entry.digest
                    )
                ])
                var bytes: [UInt8] = []
                let writer = try SnapshotWriter(manifest: manifest) { bytes.append(contentsOf: $0) }
                while let batch = try await read.next(entry.name, maximumBytes: 1 << 16) { try batch.forEach { body, _ in try writer.append(body: body) } }
                try writer.finish()
                try Data(bytes).write(to: URL(fileURLWithPath: "\(directory)/\(name).snapshot"))
                return (bytes, SHA256.hash(bytes).map { String(format: "%02x", $0) }.joined())
            }
            _ = try await client.write(.post, "/api/widgets", #"[{"id":"a"}]"#)
            let old = try await bake("widgets-1")
            _ = try await client.write(.post, "/api/widgets", #"[{"id":"b"}]"#)
            let new = try await bake("widgets-2")

            let served = try await client.get("/snapshots/\(old.sha256)")
            #expect(served.status == .ok)
            #expect(Array(served.body.readableBytesView) == old.bytes)
            #expect(served.headers[.cacheControl] == "public, max-age=31536000, immutable")
            #expect(served.headers[.eTag] == "\"\(old.sha256)\"")
            #expect(try await client.get("/snapshots/\(old.sha256)", [.ifNoneMatch: "\"\(old.sha256)\""]).status == .notModified)

            let current = try await client.get("/snapshots/current/widgets")
            #expect(current.status == .temporaryRedirect)
            #expect(current.headers[.location] == "/snapshots/\(new.sha256)")
            #expect(current.headers[.cacheControl] == "public, max-age=60")

            for path in [
                "/snapshots/\(String(repeating: "0", count: 64))", "/snapshots/..%2F..%2Fetc%2Fpasswd", "/snapshots/\(old.sha256.uppercased())",
                "/snapshots/current/gadgets",
            ] {
                let missing = try await client.get(path)
                #expect(missing.status == .notFound, "\(path)")
                #expect(String(buffer: missing.body).contains("unknown-snapshot"), "\(path)")
            }
        }
        try await withServer(.loopback) { client, _ in
            let off = try await client.get("/snapshots/\(String(repeating: "a", count: 64))")
            #expect(off.status == .notFound && String(buffer: off.body).contains("snapshots-not-served"))
        }
    }
}

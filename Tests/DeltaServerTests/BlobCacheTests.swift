import DeltaCore
import DeltaServer
import DeltaTestSupport
import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
import Testing

@Suite("Blobs behind a stock Varnish: public ones served by the cache, private ones never")
struct BlobCacheTests {
    /// A Varnish with nothing but its backend: the built-in VCL decides what it caches. Its
    /// client connections stay open when idle for 10 minutes, not 5 s: the test's one connection
    /// once sat idle longer on a loaded machine, and the next request found it closed.
    static func startVarnish(upstream: Int, directory: String) async throws -> (ChildProcess, Int) {
        let varnishd = try requireProgram("varnishd", package: "varnish")
        let vcl = "\(directory)/blobs.vcl"
        try """
        vcl 4.1;
        backend origin { .host = "127.0.0.1"; .port = "\(upstream)"; }
        """.write(toFile: vcl, atomically: true, encoding: .utf8)
        return try await startListening { port in
            try ChildProcess(
                varnishd,
                ["-F", "-j", "none", "-a", "127.0.0.1:\(port)", "-f", vcl, "-n", "\(directory)/varnish-\(port)", "-s", "malloc,64m", "-p", "timeout_idle=600"])
        }
    }

    @Test(
        "A public blob is fetched from the origin once, then served by Varnish, ranges too; Ada's private one reaches the origin every time and Bob still gets 404",
        arguments: Backend.available)
    func varnish(backend: Backend) async throws {
        try await withUserServer(backend: backend, rules: exampleRules) { origin, _ in
            let directory = try makeTemporaryDirectory("varnish-blobs")
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let (varnish, port) = try await Self.startVarnish(upstream: try #require(origin.port), directory: directory)
            defer { Task { await varnish.stop(SIGKILL) } }
            let ada = try await Mint.hs256("ada")
            let bob = try await Mint.hs256("bob")
            let (map, mapHash) = BlobRouteTests.bytes(200_000, seed: 21)
            let (photo, photoHash) = BlobRouteTests.bytes(50_000, seed: 22)
            _ = try await BlobRouteTests.upload(origin, mapHash, map, type: "image/png")
            _ = try await origin.write(.put, "/api/airports/a1", #"{"id":"a1","map":{"$blob":"\#(mapHash.hex)","size":200000,"type":"image/png"}}"#)
            _ = try await BlobRouteTests.upload(origin, photoHash, photo, type: "image/jpeg", auth: "Bearer \(ada)")
            let note = try await origin.execute(
                uri: "/api/notes/n1", method: .put, headers: [.authorization: "Bearer \(ada)", .ifNoneMatch: "*", .contentType: "application/json"],
                body: ByteBuffer(string: #"{"id":"n1","photo":{"$blob":"\#(photoHash.hex)","size":50000,"type":"image/jpeg"}}"#))
            #expect(note.status == .ok)

            try await TestClient.withClient(host: "127.0.0.1", port: port) { client in
                for _ in 0..<5 {
                    let got = try await client.send("/blobs/\(mapHash.hex)", .get)
                    #expect(got.status == 200 && got.bytes == map)
                }
                let part = try await client.send("/blobs/\(mapHash.hex)", .get, headers: [.range: "bytes=1000-1999"])
                #expect(part.status == 206 && part.bytes == Array(map[1000..<2000]))
                #expect(part.header("Content-Range") == "bytes 1000-1999/200000")
                #expect(try await origin.metric("deltasnap_blob_downloads_total") == 1, "Varnish did not keep the public blob")

                for _ in 0..<3 {
                    let hers = try await client.send("/blobs/\(photoHash.hex)", .get, headers: [.authorization: "Bearer \(ada)"])
                    #expect(hers.status == 200 && hers.bytes == photo)
                    let his = try await client.send("/blobs/\(photoHash.hex)", .get, headers: [.authorization: "Bearer \(bob)"])
                    #expect(his.status == 404)
                    #expect(try await client.send("/blobs/\(photoHash.hex)", .get).status == 404)
                }
                #expect(try await origin.metric("deltasnap_blob_downloads_total") == 4, "Varnish served a private blob from its cache")
            }
            await varnish.stop(SIGKILL)
        }
    }
}

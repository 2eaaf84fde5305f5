import DeltaCore
import DeltaServer
import DeltaStore
import DeltaTestSupport
import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
import Testing

@Suite("Blobs over HTTP: content-addressed uploads, immutable downloads, ranges, and records that reference them")
struct BlobRouteTests {
    /// `count` bytes from `seed`, and their hash.
    static func bytes(_ count: Int, seed: UInt64) -> ([UInt8], BlobHash) {
        var random = SeededGenerator(seed: seed)
        let bytes = (0..<count).map { _ in UInt8(truncatingIfNeeded: random.next()) }
        return (bytes, BlobHash.of(bytes))
    }

    static func upload(
        _ client: some TestClientProtocol, _ hash: BlobHash, _ bytes: [UInt8], type: String? = "image/png", auth: String? = "Bearer \(secret)"
    ) async throws -> TestResponse {
        var headers: HTTPFields = [:]
        if let type { headers[.contentType] = type }
        if let auth { headers[.authorization] = auth }
        return try await client.execute(uri: "/blobs/\(hash.hex)", method: .put, headers: headers, body: ByteBuffer(bytes: bytes))
    }

    @Test("PUT answers the reference to put in a record, the same for the same bytes; GET serves it once a record references it", arguments: Backend.available)
    func uploadAndDownload(backend: Backend) async throws {
        try await withServer(.loopback, backend: backend) { client, _ in
            let (bytes, hash) = Self.bytes(70_000, seed: 1)
            let reference = #"{"$blob":"\#(hash.hex)","size":70000,"type":"image/png"}"#
            for _ in 0..<2 {
                let put = try await Self.upload(client, hash, bytes)
                #expect(put.status == .ok)
                #expect(put.text == reference + "\n")
                #expect(put.header("ETag") == "\"\(hash.hex)\"")
                #expect(put.header("Cache-Control") == "no-store")
            }
            // A second upload with another type keeps the first one's.
            #expect(try await Self.upload(client, hash, bytes, type: "image/jpeg").text == reference + "\n")
            // Nobody but the owner reads a blob no record references: not even whether it exists.
            let unreferenced = try await client.get("/blobs/\(hash.hex)")
            #expect(unreferenced.status == .notFound)
            #expect(unreferenced.header("Content-Type") == "application/problem+json")
            let owner = try await client.get("/blobs/\(hash.hex)", [.authorization: "Bearer \(secret)"])
            #expect(owner.status == .ok && owner.bytes == bytes)
            #expect(owner.header("Cache-Control") == "private, max-age=31536000, immutable")

            let write = try await client.write(.put, "/api/notes/a", #"{"id":"a","photo":\#(reference)}"#)
            #expect(write.status == .ok)
            let got = try await client.get("/blobs/\(hash.hex)")
            #expect(got.status == .ok)
            #expect(got.bytes == bytes)
            #expect(got.header("ETag") == "\"\(hash.hex)\"")
            #expect(got.header("Content-Type") == "image/png")
            #expect(got.header("Content-Length") == "70000")
            #expect(got.header("Accept-Ranges") == "bytes")
            #expect(got.header("Cache-Control") == "public, max-age=31536000, immutable")
            #expect(got.header("X-Content-Type-Options") == "nosniff")
            let head = try await client.execute(uri: "/blobs/\(hash.hex)", method: .head, headers: [:])
            #expect(head.status == .ok && head.bytes.isEmpty && head.header("Content-Length") == "70000")
            let again = try await client.get("/blobs/\(hash.hex)", [.ifNoneMatch: "\"\(hash.hex)\""])
            #expect(again.status == .notModified && again.bytes.isEmpty)

            // Hidden, the record no longer lets anyone but the owner read it.
            _ = try await client.write(.delete, "/api/notes/a", "")
            #expect(try await client.get("/blobs/\(hash.hex)").status == .notFound)

            let metrics = String(buffer: try await client.get("/metrics").body)
            #expect(metrics.contains("deltasnap_blobs_stored 1.0\n"), "\(metrics.split(separator: "\n").filter { $0.contains("blob") })")
            #expect(metrics.contains("deltasnap_blob_bytes 70000.0\n"))
            #expect(metrics.contains("deltasnap_blob_uploads_total 3\n"))
        }
    }

    @Test("Bytes that are not their name, too many bytes, bad names and types, no credential: a clear 4xx, nothing stored", arguments: Backend.available)
    func refusals(backend: Backend) async throws {
        try await withServer(.loopback, backend: backend, configure: { $0.maximumBlobBytes = 1_000 }) { client, store in
            let (bytes, hash) = Self.bytes(900, seed: 2)
            var wrong = bytes
            wrong[17] ^= 1
            let mismatch = try await Self.upload(client, hash, wrong)
            #expect(mismatch.status == .unprocessableContent)
            #expect(mismatch.text.contains(#""type":"urn:deltasnap:problem:blob-hash""#), "\(mismatch.text)")
            #expect(mismatch.text.contains(BlobHash.of(wrong).hex))
            let truncated = try await Self.upload(client, hash, Array(bytes.prefix(899)))
            #expect(truncated.status == .unprocessableContent)
            let (big, bigHash) = Self.bytes(1_001, seed: 3)
            let tooLarge = try await Self.upload(client, bigHash, big)
            #expect(tooLarge.status == .contentTooLarge)
            #expect(tooLarge.text.contains("urn:deltasnap:problem:too-large"))
            for name in [hash.hex.uppercased(), String(hash.hex.dropLast()), hash.hex + "0", "..%2F..%2Fetc%2Fpasswd", String(repeating: "g", count: 64)] {
                let response = try await client.execute(
                    uri: "/blobs/\(name)", method: .put, headers: [.authorization: "Bearer \(secret)"], body: ByteBuffer(bytes: bytes))
                #expect(response.status == .badRequest, "\(name)")
                #expect(response.text.contains("urn:deltasnap:problem:invalid-blob-hash"), "\(name): \(response.text)")
                #expect(try await client.get("/blobs/\(name)").status == .badRequest)
            }
            #expect(try await Self.upload(client, hash, bytes, type: "not a type").status == .badRequest)
            let anonymous = try await Self.upload(client, hash, bytes, auth: nil)
            #expect(anonymous.status == .unauthorized && anonymous.header("WWW-Authenticate") != nil)
            #expect(try await Self.upload(client, hash, bytes, auth: "Bearer wrong-secret").status == .unauthorized)
            let totals = try await store.blobTotals()
            #expect(totals.blobs == 0 && totals.bytes == 0)
            #expect(try await store.blob(hash) == nil)
            #expect(try await store.blob(bigHash) == nil)
            // After all that, the right bytes are stored, without a type: application/octet-stream.
            #expect(try await Self.upload(client, hash, bytes, type: nil).text.contains(#""type":"application/octet-stream""#))
        }
    }

    @Test("Range: one range of bytes as 206, unsatisfiable ones as 416, and what the RFC lets a server ignore ignored", arguments: Backend.available)
    func ranges(backend: Backend) async throws {
        try await withServer(.loopback, backend: backend) { client, _ in
            let (bytes, hash) = Self.bytes(1_000, seed: 4)
            _ = try await Self.upload(client, hash, bytes)
            _ = try await client.write(.put, "/api/files/f", #"{"id":"f","file":{"$blob":"\#(hash.hex)","size":1000,"type":"image/png"}}"#)
            let cases: [(String, HTTPResponse.Status, Range<Int>?, String?)] = [
                ("bytes=0-", .partialContent, 0..<1000, "bytes 0-999/1000"),
                ("bytes=0-0", .partialContent, 0..<1, "bytes 0-0/1000"),
                ("bytes=10-19", .partialContent, 10..<20, "bytes 10-19/1000"),
                ("bytes=990-5000", .partialContent, 990..<1000, "bytes 990-999/1000"),
                ("bytes=-1", .partialContent, 999..<1000, "bytes 999-999/1000"),
                ("bytes=-5000", .partialContent, 0..<1000, "bytes 0-999/1000"),
                ("bytes=999-", .partialContent, 999..<1000, "bytes 999-999/1000"),
                ("bytes=1000-", .rangeNotSatisfiable, nil, "bytes */1000"),
                ("bytes=-0", .rangeNotSatisfiable, nil, "bytes */1000"),
                ("bytes=20-10", .ok, 0..<1000, nil),
                ("bytes=0-1,5-6", .ok, 0..<1000, nil),
                ("items=0-1", .ok, 0..<1000, nil),
                ("bytes=x-y", .ok, 0..<1000, nil),
                ("bytes=99999999999999999999-", .ok, 0..<1000, nil),
            ]
            for (range, status, part, contentRange) in cases {
                let response = try await client.get("/blobs/\(hash.hex)", [.range: range])
                #expect(response.status == status, "\(range)")
                #expect(response.header("Content-Range") == contentRange, "\(range)")
                if let part {
                    #expect(response.bytes == Array(bytes[part]), "\(range)")
                    #expect(response.header("Content-Length") == String(part.count), "\(range)")
                } else {
                    #expect(response.text.contains("urn:deltasnap:problem:range-not-satisfiable"), "\(range)")
                }
            }
            // If-Range: the range counts only for this blob's ETag.
            let stale = try await client.get("/blobs/\(hash.hex)", [.range: "bytes=0-9", .ifRange: "\"other\""])
            #expect(stale.status == .ok && stale.bytes == bytes)
            let current = try await client.get("/blobs/\(hash.hex)", [.range: "bytes=0-9", .ifRange: "\"\(hash.hex)\""])
            #expect(current.status == .partialContent && current.bytes == Array(bytes[0..<10]))
            // An empty blob has no byte to range over.
            let empty = BlobHash.of([UInt8]())
            _ = try await Self.upload(client, empty, [])
            _ = try await client.write(.put, "/api/files/e", #"{"id":"e","file":{"$blob":"\#(empty.hex)","size":0,"type":"image/png"}}"#)
            #expect(try await client.get("/blobs/\(empty.hex)").status == .ok)
            let emptyRange = try await client.get("/blobs/\(empty.hex)", [.range: "bytes=0-"])
            #expect(emptyRange.status == .rangeNotSatisfiable && emptyRange.header("Content-Range") == "bytes */0")
        }
    }

    @Test(
        "A write, batch or push that references a blob the server does not hold is refused for that record; a malformed reference too",
        arguments: Backend.available)
    func blobMissing(backend: Backend) async throws {
        try await withServer(.loopback, backend: backend) { client, store in
            let (bytes, held) = Self.bytes(100, seed: 5)
            _ = try await Self.upload(client, held, bytes)
            let absent = Self.bytes(100, seed: 6).1
            func reference(_ hash: BlobHash) -> String { #"{"$blob":"\#(hash.hex)","size":100,"type":"image/png"}"# }

            let put = try await client.write(.put, "/api/notes/a", #"{"id":"a","photos":[\#(reference(held)),\#(reference(absent))]}"#)
            #expect(put.status == .conflict)
            #expect(put.text.contains("urn:deltasnap:problem:blob-missing"))
            #expect(put.text.contains(#""missing":["\#(absent.hex)"]"#), "\(put.text)")
            let batch = try await client.write(.post, "/api/notes", #"[{"id":"b","photo":\#(reference(held))},{"id":"c","photo":\#(reference(absent))}]"#)
            #expect(batch.status == .conflict)
            #expect(try await store.record("b", in: CollectionName("notes")) == nil, "a refused batch writes nothing")
            let malformed = try await client.write(.put, "/api/notes/d", #"{"id":"d","photo":{"$blob":"\#(held.hex)","size":-1,"type":"image/png"}}"#)
            #expect(malformed.status == .badRequest)
            #expect(malformed.text.contains("urn:deltasnap:problem:invalid-blob") && malformed.text.contains("/photo"), "\(malformed.text)")

            let push = try await client.execute(
                uri: "/push", method: .post, headers: [.authorization: "Bearer \(secret)", .contentType: "application/json"],
                body: ByteBuffer(
                    string: #"""
                        {"client":"c1","mutations":[
                        {"id":1,"collection":"notes","op":"put","record":{"id":"p","photo":\#(reference(absent))}},
                        {"id":2,"collection":"notes","op":"put","record":{"id":"q","photo":\#(reference(held))}}]}
                        """#))
            #expect(push.status == .ok, "\(push.text)")
            let results = try JSONValue(parsing: push.bytes)["results"]
            guard case .array(let items)? = results else { throw TestFailure("no results: \(push.text)") }
            #expect(items.count == 2)
            #expect(items.first?["status"] == .string("invalid"))
            if case .string(let reason)? = items.first?["reason"] { #expect(reason.hasPrefix("blob-missing: ") && reason.contains(absent.hex)) }
            #expect(items.last?["status"] == .string("applied"))
            #expect(try await store.record("p", in: CollectionName("notes")) == nil)
            #expect(try await store.referrers(of: held, in: nil, limit: 10).map(\.record.id) == ["q"])
        }
    }
}

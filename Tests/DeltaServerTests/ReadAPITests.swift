import DeltaCore
import DeltaStore
import DeltaTestSupport
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Testing

@Suite("GET /api/{collection}: full, delta, 304, reset")
struct ReadAPITests {
    @Test("Full dataset: exact status, headers and body", arguments: Transport.allCases, Backend.available)
    func full(transport: Transport, backend: Backend) async throws {
        try await withServer(transport, backend: backend) { client, store in
            let put = try await client.write(.post, "/api/widgets", #"[{"id":"w2","color":"yellow"},{"id":"w1","color":"blue"}]"#)
            #expect(put.status == .ok)
            let response = try await client.get("/api/widgets")
            #expect(response.status == .ok)
            #expect(response.text == #"{"widgets":[{"color":"blue","id":"w1"},{"color":"yellow","id":"w2"}]}"#)
            let database = String(store.databaseID, radix: 16)
            let etag = try #require(response.header("ETag"))
            #expect(etag.hasPrefix("W/\"1.\(String(repeating: "0", count: 16 - database.count))\(database).1."))
            #expect(response.header("Last-Modified") == "Thu, 01 Jan 1970 00:00:01 GMT")
            #expect(response.header("Content-Type") == "application/json")
            #expect(response.header("Cache-Control") == "no-store")
            #expect(response.header("Delta-Mode") == "full")
            #expect(response.header("Delta-Base") == nil)
            #expect(response.header("Vary") == "Accept-Encoding, If-None-Match, If-Modified-Since, Delta-Client")
            #expect(response.header("Content-Encoding") == nil)
        }
    }

    @Test("Delta: only what changed after the echoed token, tombstones as hidden records, then 304", arguments: Transport.allCases, Backend.available)
    func delta(transport: Transport, backend: Backend) async throws {
        try await withServer(transport, backend: backend) { client, _ in
            _ = try await client.write(.post, "/api/widgets", #"[{"id":"w1","color":"blue"},{"id":"w2","color":"yellow"},{"id":"w3","color":"red"}]"#)
            let first = try await client.get("/api/widgets")
            let etag = try #require(first.header("ETag"))
            let date = try #require(first.header("Last-Modified"))
            _ = try await client.write(.put, "/api/widgets/w2", #"{"id":"w2","color":"purple"}"#)
            let hide = try await client.execute(uri: "/api/widgets/w1", method: .delete, headers: [.authorization: "Bearer \(secret)"])
            #expect(hide.status == .ok)
            #expect(hide.text.contains(#""hidden":1"#))

            let delta = try await client.get("/api/widgets", [.ifNoneMatch: etag])
            #expect(delta.status == .ok)
            #expect(delta.text == #"{"widgets":[{"color":"purple","id":"w2"},{"hidden":true,"color":"blue","id":"w1"}]}"#)
            #expect(delta.header("Delta-Mode") == "delta")
            #expect(delta.header("Delta-Base") == etag)
            #expect(delta.header("Last-Modified") == "Thu, 01 Jan 1970 00:00:03 GMT")
            #expect(delta.header("Cache-Control") == "no-store")

            // The Last-Modified form alone gives the same delta.
            let byDate = try await client.get("/api/widgets", [.ifModifiedSince: date])
            #expect(byDate.text == delta.text)
            #expect(byDate.header("Delta-Base") == date)
            #expect(byDate.header("ETag") == delta.header("ETag"))

            // Echoing the new validators verbatim: nothing changed, so 304 with the validators repeated.
            let newTag = try #require(delta.header("ETag"))
            let notModified = try await client.get("/api/widgets", [.ifNoneMatch: newTag, .ifModifiedSince: try #require(delta.header("Last-Modified"))])
            #expect(notModified.status == .notModified)
            #expect(notModified.body.readableBytes == 0)
            #expect(notModified.header("ETag") == newTag)
            #expect(notModified.header("Last-Modified") == delta.header("Last-Modified"))
            #expect(notModified.header("Cache-Control") == "no-store")

            // Bringing w1 back: it arrives as a visible record.
            _ = try await client.write(.post, "/api/widgets", #"[{"id":"w1","color":"blue","hidden":false}]"#)
            let back = try await client.get("/api/widgets", [.ifNoneMatch: newTag])
            #expect(back.text == #"{"widgets":[{"color":"blue","id":"w1"}]}"#)
        }
    }

    @Test("If-None-Match takes precedence over If-Modified-Since (RFC 9110 §13.2.2)", arguments: Transport.allCases, Backend.available)
    func precedence(transport: Transport, backend: Backend) async throws {
        try await withServer(transport, backend: backend) { client, _ in
            _ = try await client.write(.put, "/api/widgets/a", #"{"id":"a"}"#)
            let etag = try #require(try await client.get("/api/widgets").header("ETag"))
            let good = try await client.get("/api/widgets", [.ifNoneMatch: etag, .ifModifiedSince: "not a date"])
            #expect(good.status == .notModified)
            let bad = try await client.get("/api/widgets", [.ifNoneMatch: "\"garbage\"", .ifModifiedSince: "Thu, 01 Jan 1970 00:00:01 GMT"])
            #expect(bad.status == .conflict)
        }
    }

    @Test("Every token the server cannot honour exactly gets 409 with Delta-Reset and a problem body", arguments: Transport.allCases, Backend.available)
    func resets(transport: Transport, backend: Backend) async throws {
        try await withServer(transport, backend: backend) { client, store in
            _ = try await client.write(.put, "/api/widgets/a", #"{"id":"a"}"#)
            let etag = try #require(try await client.get("/api/widgets").header("ETag"))
            let token = try Token(entityTag: etag)
            let cases: [(HTTPFields, String)] = [
                ([.ifNoneMatch: "\"abc\""], "malformed"),
                ([.ifNoneMatch: "*"], "malformed"),
                ([.ifNoneMatch: "\(etag), \(etag)"], "malformed"),
                ([.ifModifiedSince: "yesterday"], "malformed"),
                ([.ifModifiedSince: "Sunday, 06-Nov-94 08:49:37 GMT"], "malformed"),
                ([.ifNoneMatch: Token(database: store.databaseID &+ 1, position: 1, commit: token.commit).entityTag], "foreign-database"),
                ([.ifNoneMatch: Token(database: store.databaseID, position: 1, commit: token.commit &+ 1).entityTag], "unknown-commit"),
                ([.ifNoneMatch: Token(database: store.databaseID, position: 2, commit: 1).entityTag], "ahead"),
                ([.ifModifiedSince: "Sat, 21 Nov 2026 12:00:00 GMT"], "ahead"),
            ]
            for (headers, reason) in cases {
                let response = try await client.get("/api/widgets", headers)
                #expect(response.status == .conflict, "\(headers)")
                #expect(response.header("Delta-Reset") == reason, "\(headers)")
                #expect(response.header("Content-Type") == "application/problem+json")
                #expect(response.header("Cache-Control") == "no-store")
                let problem = try JSONValue(parsing: response.bytes)
                #expect(problem["type"] == .string("urn:deltasnap:problem:reset-required"))
                #expect(problem["status"] == .number("409"))
                #expect(problem["reason"] == .string(reason))
                guard case .string(let detail) = problem["detail"] else { throw TestFailure("no detail") }
                #expect(detail.hasPrefix("token: ") && detail.hasSuffix("reset to the snapshot and sync again"))
            }
        }
    }

    @Test("gzip when asked, by Accept-Encoding q-values, decoding to the same body", arguments: Transport.allCases, Backend.available)
    func gzipEncoding(transport: Transport, backend: Backend) async throws {
        try await withServer(transport, backend: backend) { client, _ in
            let batch = (0..<500).map { #"{"id":"r\#($0)","text":"some repetitive text \#($0 % 7)"}"# }.joined(separator: ",")
            _ = try await client.write(.post, "/api/big", "[\(batch)]")
            let plain = try await client.get("/api/big")
            let zipped = try await client.get("/api/big", [.acceptEncoding: "br;q=1, gzip;q=0.8"])
            #expect(zipped.header("Content-Encoding") == "gzip")
            #expect(zipped.bytes.count < plain.bytes.count / 4)
            #expect(try gunzip(zipped.bytes) == plain.bytes)
            #expect(zipped.header("ETag") == plain.header("ETag"))
            for refused in ["gzip;q=0", "identity", "br", "*;q=0"] {
                #expect(try await client.get("/api/big", [.acceptEncoding: refused]).header("Content-Encoding") == nil, "\(refused)")
            }
            #expect(try await client.get("/api/big", [.acceptEncoding: "*"]).header("Content-Encoding") == "gzip")
        }
    }

    @Test("Unknown and invalid collections, unknown routes: 4xx problems", arguments: Transport.allCases, Backend.available)
    func notFound(transport: Transport, backend: Backend) async throws {
        try await withServer(transport, backend: backend) { client, _ in
            let missing = try await client.get("/api/nothing")
            #expect(missing.status == .notFound)
            #expect(missing.header("Content-Type") == "application/problem+json")
            #expect(missing.text.contains(#""detail":"collection nothing: has no records""#))
            let invalid = try await client.get("/api/bad%20name")
            #expect(invalid.status == .badRequest)
            #expect(invalid.text.contains("invalid-collection"))
            let long = try await client.get("/api/" + String(repeating: "a", count: 65))
            #expect(long.status == .badRequest)
            let route = try await client.get("/nowhere")
            #expect(route.status == .notFound)
            #expect(route.header("Content-Type") == "application/problem+json")
        }
    }
}

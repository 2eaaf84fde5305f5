import DeltaCore
import DeltaTestSupport
import DeltaServer
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Testing

@Suite("Selections over HTTP: the wire format and its errors")
struct SelectionAPITests {
    static let red = "filter=" + #"{"c":{"eq":"red"}}"#.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!

    func seeded(_ client: some TestClientProtocol) async throws {
        let response = try await client.write(.post, "/api/items", #"[{"id":"a","c":"red"},{"id":"b","c":"blue"},{"id":"c","c":"red"},{"id":"d","c":"red"}]"#)
        #expect(response.status == .ok)
    }

    @Test("A selection's full answer: the first N matching records by id, and a token bound to it", arguments: Backend.available)
    func full(backend: Backend) async throws {
        try await withServer(.loopback, backend: backend) { client, _ in
            try await seeded(client)
            let response = try await client.get("/api/items?\(Self.red)&limit=2")
            #expect(response.status == .ok)
            #expect(response.text == #"{"items":[{"c":"red","id":"a"},{"c":"red","id":"c"}]}"#)
            #expect(response.header("Delta-Mode") == "full")
            let token = try Token(entityTag: try #require(response.header("ETag")))
            let selection = try Selection(filter: #"{"c":{"eq":"red"}}"#, limit: "2")
            #expect(token.selection == SelectionMark(fingerprint: selection.fingerprint, boundary: "c"))
            // The same token with another selection, with none, or a date alone: 409 selection-changed.
            for path in ["/api/items?\(Self.red)&limit=3", "/api/items", "/api/items?limit=2"] {
                let other = try await client.get(path, [.ifNoneMatch: token.entityTag])
                #expect(other.status == .conflict, "\(path)")
                #expect(other.header("Delta-Reset") == "selection-changed", "\(path)")
                #expect(other.header("Content-Type") == "application/problem+json")
            }
            let dated = try await client.get("/api/items?\(Self.red)&limit=2", [.ifModifiedSince: token.lastModified])
            #expect(dated.header("Delta-Reset") == "selection-changed")
            // Unchanged: 304 with the same token.
            let again = try await client.get("/api/items?\(Self.red)&limit=2", [.ifNoneMatch: token.entityTag])
            #expect(again.status == .notModified)
            #expect(again.header("ETag") == token.entityTag)
        }
    }

    @Test("A change outside the selection is a 304 with a newer token; one inside is an exact delta", arguments: Backend.available)
    func deltas(backend: Backend) async throws {
        try await withServer(.loopback, backend: backend) { client, _ in
            try await seeded(client)
            let first = try await client.get("/api/items?\(Self.red)&limit=2")
            let etag = try #require(first.header("ETag"))
            _ = try await client.write(.put, "/api/items/b", #"{"id":"b","c":"blue","n":1}"#)
            let outside = try await client.get("/api/items?\(Self.red)&limit=2", [.ifNoneMatch: etag])
            #expect(outside.status == .notModified)
            let newer = try #require(outside.header("ETag"))
            #expect(try Token(entityTag: newer).position == 2)
            _ = try await client.write(.put, "/api/items/0", #"{"id":"0","c":"red"}"#)
            let inside = try await client.get("/api/items?\(Self.red)&limit=2", [.ifNoneMatch: newer])
            #expect(inside.status == .ok)
            #expect(inside.header("Delta-Mode") == "delta")
            #expect(inside.text == #"{"items":[{"c":"red","id":"0"},{"hidden":true,"c":"red","id":"c"}]}"#)
        }
    }

    @Test("Bad selections are 400 invalid-filter with the reason", arguments: [
        ("filter=%7B%22c%22%3A%7B%22like%22%3A1%7D%7D", "unknown operator"),
        ("filter=%7B%22c%22", "not valid JSON"),
        ("limit=0", "limit must be"),
        ("limit=ten", "limit must be"),
        ("limit=1&limit=2", "at most once"),
    ])
    func badRequests(query: String, says: String) async throws {
        try await withServer(.loopback) { client, _ in
            try await seeded(client)
            let response = try await client.get("/api/items?\(query)")
            #expect(response.status == .badRequest)
            #expect(response.header("Content-Type") == "application/problem+json")
            #expect(response.text.contains("invalid-filter") && response.text.contains(says), "\(response.text)")
        }
    }
}

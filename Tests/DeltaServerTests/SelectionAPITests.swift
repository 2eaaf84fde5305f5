import DeltaCore
import DeltaServer
import DeltaTestSupport
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Testing

@Suite("Selections through the application (in-process: the router's rules need no socket): the wire format and its errors")
struct SelectionAPITests {
    static let red = "filter=" + #"{"c":{"eq":"red"}}"#.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!

    func seeded(_ client: some TestClientProtocol) async throws {
        let response = try await client.write(.post, "/api/items", #"[{"id":"a","c":"red"},{"id":"b","c":"blue"},{"id":"c","c":"red"},{"id":"d","c":"red"}]"#)
        #expect(response.status == .ok)
    }

    @Test("A selection's full answer: the first N matching records by id, and a token bound to it", arguments: Backend.available)
    func full(backend: Backend) async throws {
        try await withServer(.inProcess, backend: backend) { client, _ in
            try await seeded(client)
            let response = try await client.get("/api/items?\(Self.red)&limit=2")
            #expect(response.status == .ok)
            #expect(response.text == #"{"items":[{"c":"red","id":"a"},{"c":"red","id":"c"}]}"#)
            #expect(response.header("Delta-Mode") == "full")
            let token = try Token(entityTag: try #require(response.header("ETag")))
            let selection = try Selection(filter: #"{"c":{"eq":"red"}}"#, limit: "2")
            let digest = StateDigest(bodies: [#"{"c":"red","id":"a"}"#, #"{"c":"red","id":"c"}"#].map { Array($0.utf8) })
            #expect(token.selection == SelectionMark(fingerprint: selection.fingerprint, boundary: "c", digest: digest))
            #expect(response.header("Delta-Digest") == digest.hex)
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
        try await withServer(.inProcess, backend: backend) { client, _ in
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

    @Test("A selection's delta of more changes than a page: exact, the limit's cut moved by them", arguments: Backend.available)
    func largeDelta(backend: Backend) async throws {
        try await withServer(.inProcess, backend: backend) { client, _ in
            func items(_ range: Range<Int>, _ colour: (Int) -> String) -> String {
                "[" + range.map { #"{"id":"r\#(String(format: "%05d", $0))","c":"\#(colour($0))"}"# }.joined(separator: ",") + "]"
            }
            _ = try await client.write(.post, "/api/items", items(0..<3000) { $0 % 2 == 0 ? "red" : "blue" })
            let path = "/api/items?\(Self.red)&limit=1200"
            var replica = ModelReplica()
            #expect(try replica.apply(try await client.get(path).reply, sentETag: nil))
            // 300 changes (more than the opening statement reads ahead), then 2,400 (more than a page).
            for (range, colour) in [(100..<400, "blue"), (0..<2400, "red")] {
                _ = try await client.write(.post, "/api/items", items(range) { $0 % 3 == 0 ? "green" : colour })
                let sent = replica.etag
                let delta = try await client.get(path, [.ifNoneMatch: try #require(sent)]).reply
                #expect(delta.status == 200 && delta.header("Delta-Mode") == "delta")
                #expect(try replica.apply(delta, sentETag: sent))
                var full = ModelReplica()
                #expect(try full.apply(try await client.get(path).reply, sentETag: nil))
                #expect(replica.records.count == 1200 && replica.records == full.records, "after \(range.count) changes")
                #expect(delta.header("Delta-Digest") == ModelReplica.digest(of: full.records))
            }
        }
    }

    @Test(
        "Bad selections are 400 invalid-filter with the reason",
        arguments: [
            ("filter=%7B%22c%22%3A%7B%22like%22%3A1%7D%7D", "unknown operator"),
            ("filter=%7B%22c%22", "not valid JSON"),
            ("limit=0", "limit must be"),
            ("limit=ten", "limit must be"),
            ("limit=1&limit=2", "at most once"),
            ("filter=%7B%22c%22%3A%7B%22eq%22%3A%22%FF%22%7D%7D", "not UTF-8 once percent-decoded"),
            ("filter=%FF", "not UTF-8 once percent-decoded"),
            ("limit=1&filter=%7B%22c%22%3A%7B%22eq%22%3A%22%C3%22%7D%7D", "not UTF-8 once percent-decoded"),
        ])
    func badRequests(query: String, says: String) async throws {
        try await withServer(.inProcess) { client, _ in
            try await seeded(client)
            let response = try await client.get("/api/items?\(query)")
            #expect(response.status == .badRequest)
            #expect(response.header("Content-Type") == "application/problem+json")
            #expect(response.text.contains("invalid-filter") && response.text.contains(says), "\(response.text)")
        }
    }

    @Test("Mutated filters and limits: always 200 or 400 with a problem, never a 5xx", arguments: Backend.available)
    func hostileFilters(backend: Backend) async throws {
        let seed = SeededGenerator.seed(for: "SelectionAPITests.hostileFilters(\(backend))")
        try await withServer(.inProcess, backend: backend) { client, _ in
            try await seeded(client)
            var random = SeededGenerator(seed: seed)
            let valid = Array(#"{"or":[{"c":{"in":["red",1,null,true]}},{"not":{"n":{"gte":-1.5e3}}},{"and":[{"m":{"exists":false}}]}]}"#.utf8)
            let alphabet = Array(#"{}[]":,.-+eE0123456789 abcnotrulfsqxyz\"#.utf8)
            var statuses: [Int: Int] = [:]
            for round in 0..<400 {
                var bytes = valid
                for _ in 0..<Int(random.next() % 4) + 1 {
                    let at = Int(random.next() % UInt64(bytes.count + 1))
                    switch random.next() % 3 {
                    case 0 where at < bytes.count: bytes.remove(at: at)
                    case 1: bytes.insert(alphabet[Int(random.next() % UInt64(alphabet.count))], at: at)
                    default: if at < bytes.count { bytes[at] = alphabet[Int(random.next() % UInt64(alphabet.count))] }
                    }
                }
                if random.next() % 10 == 0 { bytes = Array(repeating: UInt8(ascii: "["), count: Int(random.next() % 5000)) }
                let filter = String(decoding: bytes, as: UTF8.self).addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? ""
                let limit = ["", "&limit=1", "&limit=0", "&limit=-3", "&limit=99999999999999999999", "&limit=1e3"][Int(random.next() % 6)]
                let response = try await client.get("/api/items?filter=\(filter)\(limit)")
                statuses[Int(response.status.code), default: 0] += 1
                #expect(
                    response.status == .ok || response.status == .badRequest,
                    "seed \(seed) round \(round): \(response.status) for \(String(decoding: bytes, as: UTF8.self))")
                if response.status == .badRequest {
                    #expect(
                        response.header("Content-Type") == "application/problem+json" && response.text.contains("invalid-filter"), "seed \(seed) round \(round)"
                    )
                }
            }
            print("SelectionAPITests.hostileFilters: seed \(seed): statuses \(statuses.sorted { $0.key < $1.key })")
        }
    }
}

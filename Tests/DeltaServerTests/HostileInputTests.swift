import DeltaCore
import DeltaServer
import DeltaTestSupport
import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Generates hostile requests from a seed: mutated records, odd paths, broken validators.
struct HostileRequests {
    var random: SeededGenerator

    mutating func pick<T>(_ items: [T]) -> T { items[Int(random.next() % UInt64(items.count))] }
    mutating func chance(_ percent: UInt64) -> Bool { random.next() % 100 < percent }

    mutating func bytes(_ count: Int) -> String {
        String(decoding: (0..<count).map { _ in UInt8(truncatingIfNeeded: random.next()) }, as: UTF8.self)
    }

    mutating func body() -> String {
        let valid = #"[{"id":"a","v":1},{"id":"b","hidden":true,"n":[1,2,{"x":null}]}]"#
        switch random.next() % 9 {
        case 0: return String(valid.prefix(Int(random.next() % UInt64(valid.count))))
        case 1:
            var characters = Array(valid)
            for _ in 0..<3 { characters[Int(random.next() % UInt64(characters.count))] = pick(["\"", "{", "]", ",", ":", "\\", "\u{0}", "é"]) }
            return String(characters)
        case 2: return String(repeating: "[", count: Int(random.next() % 3_000)) + "1"
        case 3: return #"[{"id":"\#(String(repeating: "x", count: Int(random.next() % 5_000)))"}]"#
        case 4: return #"[{"id":"a"},{"id":"a"}]"#
        case 5: return pick([#"[{"id":5}]"#, #"[{"id":null}]"#, #"[{"id":""}]"#, #"[[]]"#, #"["a"]"#, "[1e999999]", "[-]", #"[{"id":"a","hidden":1}]"#])
        case 6: return bytes(Int(random.next() % 200))
        case 7: return #"{"id":"a","v":\#(pick(["1e5", "-0.0", "01", "1.", ".5", "NaN", "Infinity", "1e+", "\"\\ud800\""]))}"#
        default: return valid
        }
    }

    mutating func path() -> String {
        let collection = pick(["w", "w", "big", "", "a%2Fb", "%ff", "..", String(repeating: "c", count: 70), "x%20y", "%00", "w?x=1", "w%23f"])
        let id = pick(["a", "b", "%20", "%", "%zz", "a/b", String(repeating: "i", count: 600), "%C3%A9", "%E9"])
        if chance(70) { return pick(["/api/w", "/api/w", "/api/w/a", "/api/w/a", "/api/w/\(id)", "/api/\(collection)"]) }
        return pick(["/api/\(collection)", "/api/\(collection)/\(id)", "/api", "/api/", "//api/w", "/healthz", "/metrics", "/\(collection)"])
    }

    mutating func validator(good: String) -> String {
        switch random.next() % 7 {
        case 0: return good
        case 1: return String(good.dropLast(Int(random.next() % 5) + 1))
        case 2: return good.replacingOccurrences(of: "1.", with: pick(["2.", "0.", "1..", "01."]))
        case 3: return pick(["*", "W/\"\"", "\"\"", "W/", ",", "\(good), \(good)"])
        case 4: return pick(["Thu, 01 Jan 1970 00:00:01 GMT", "Thu, 01 Jan 1970 00:00:99 GMT", "Mon, 01 Jan 1970 00:00:01 GMT", "0"])
        case 5:
            // Visible ASCII and obs-text only: HTTP clients refuse to send control characters in a field.
            return String((0..<Int(random.next() % 60 + 1)).map { _ in Character(UnicodeScalar(UInt8(random.next() % 94 + 33))) })
        default: return String(repeating: "9", count: Int(random.next() % 400))
        }
    }
}

@Suite("Hostile input to the server")
struct HostileInputTests {
    @Test("Thousands of generated hostile requests: never a 5xx, and the server keeps answering", arguments: Transport.allCases, Backend.available)
    func noServerErrors(transport: Transport, backend: Backend) async throws {
        let seed = SeededGenerator.seed(for: "HostileInputTests.noServerErrors(\(transport), \(backend))")
        let scale = Int(ProcessInfo.processInfo.environment["DELTASNAP_HOSTILE_SCALE"] ?? "") ?? 1
        let cases = (transport == .inProcess ? 3_000 : 600) * scale
        try await withServer(transport, backend: backend) { client, _ in
            _ = try await client.write(.post, "/api/w", #"[{"id":"a"},{"id":"b"}]"#)
            let good = try #require(try await client.get("/api/w").header("ETag"))
            var generator = HostileRequests(random: SeededGenerator(seed: seed))
            var statuses: [Int: Int] = [:]
            for index in 0..<cases {
                let method: HTTPRequest.Method = generator.pick([.get, .get, .get, .put, .post, .delete, .patch, .head])
                let path = generator.path()
                var headers: HTTPFields = [:]
                if generator.chance(50) { headers[.ifNoneMatch] = generator.validator(good: good) }
                if generator.chance(30) { headers[.ifModifiedSince] = generator.validator(good: "Thu, 01 Jan 1970 00:00:01 GMT") }
                if generator.chance(30) { headers[.acceptEncoding] = generator.pick(["gzip", "gzip;q=0", "*;q=abc", "br, gzip;q=0.5", ";;", "gzip;q=-1"]) }
                if generator.chance(80) {
                    headers[.authorization] = generator.pick(["Bearer \(secret)", "Bearer \(secret)", "Bearer", "Basic x", "Bearer \(secret) x"])
                }
                if generator.chance(80) {
                    headers[.contentType] = generator.pick(["application/json", "application/json; charset=utf-8", "text/plain", "application/jsonx"])
                }
                let body = method == .get || method == .head ? nil : generator.body()
                let response = try await client.execute(uri: path, method: method, headers: headers, body: body.map { ByteBuffer(string: $0) })
                statuses[Int(response.status.code), default: 0] += 1
                #expect(
                    response.status.code < 500,
                    "seed \(seed) case \(index): \(method) got \(response.status.code): \(String(buffer: response.body).prefix(300))")
                if response.status.code >= 400 && response.status.code != 405 && method != .head {
                    #expect(
                        response.headers[.contentType] == "application/problem+json",
                        "seed \(seed) case \(index): a \(response.status.code) without a problem body")
                }
            }
            print("HostileInputTests.noServerErrors(\(transport)): statuses \(statuses.sorted { $0.key < $1.key })")
            #expect(try await client.get("/healthz").status == .ok)
            #expect(
                statuses.keys.contains(200) && statuses.keys.contains(400) && statuses.keys.contains(409),
                "seed \(seed): the generator missed whole classes of answers")
        }
    }

    @Test("Requests the HTTP layer refuses get a problem document: 414 for a long target, 431 for big headers, 400 for non-HTTP; in order")
    func httpLayerProblems() async throws {
        try await withServer(.loopback) { client, _ in
            _ = try await client.write(.post, "/api/w", #"[{"id":"a"}]"#)
            let port = try #require(client.port)
            let ends: @Sendable (String) -> Bool = { $0.hasSuffix("}\n") }
            let long = try await rawExchange(port: port, "GET /api/w?filter=\(String(repeating: "a", count: 18_000)) HTTP/1.1\r\nHost: x\r\n\r\n", until: ends)
            #expect(long.hasPrefix("HTTP/1.1 414 URI Too Long\r\n"))
            #expect(long.contains("Content-Type: application/problem+json\r\n"))
            #expect(
                long.hasSuffix(
                    #"{"type":"urn:deltasnap:problem:uri-too-long","title":"URI Too Long","status":414,"detail":"request target: longer than 16384 bytes (18014 bytes)"}"#
                        + "\n"))
            let fine = try await rawExchange(
                port: port, "GET /api/w HTTP/1.1\r\nHost: x\r\nX-Big: \(String(repeating: "b", count: 20_000))\r\n\r\n", until: { $0.contains("]}") })
            #expect(fine.hasPrefix("HTTP/1.1 200 OK\r\n"), "a 20 KB header is within the 64 KiB bound")
            let headersTooLarge =
                #"{"type":"urn:deltasnap:problem:headers-too-large","title":"Request Header Fields Too Large","status":431,"detail":"request: the request line and headers are over 65536 bytes or 100 fields"}"#
                + "\n"
            let big = try await rawExchange(
                port: port, "GET /api/w HTTP/1.1\r\nHost: x\r\nX-Big: \(String(repeating: "b", count: 70_000))\r\n\r\n", until: ends)
            #expect(
                big.hasPrefix("HTTP/1.1 431 Request Header Fields Too Large\r\n") && big.contains("Connection: close\r\n") && big.hasSuffix(headersTooLarge))
            #expect(big.contains("\r\nDate: "), "every answer of an origin server with a clock carries Date")
            let fields = (0..<120).map { "X-H\($0): v\r\n" }.joined()
            let many = try await rawExchange(port: port, "GET /api/w HTTP/1.1\r\nHost: x\r\n\(fields)\r\n", until: ends)
            #expect(many.hasPrefix("HTTP/1.1 431 ") && many.hasSuffix(headersTooLarge))
            let garbage = try await rawExchange(port: port, "NOT HTTP AT ALL\r\n\r\n", until: ends)
            #expect(garbage.hasPrefix("HTTP/1.1 400 Bad Request\r\n") && garbage.contains(#""type":"urn:deltasnap:problem:malformed-request""#))
            // HTTP/1.0 is not HTTP/1.1: refused the same way, a revalidation too (the raw path leaves it to the decoder).
            for old in ["GET /api/w HTTP/1.0\r\n\r\n", "GET /api/w HTTP/1.0\r\nIf-None-Match: W/\"x\"\r\nConnection: keep-alive\r\n\r\n"] {
                let refused = try await rawExchange(port: port, old, until: ends)
                #expect(
                    refused.hasPrefix("HTTP/1.1 400 Bad Request\r\n") && refused.contains("Connection: close\r\n")
                        && refused.contains(#""type":"urn:deltasnap:problem:malformed-request""#), "\(refused)")
            }
            // Behind an HTTP/1.1 request on the same connection: answered after it.
            let behind = try await rawExchange(
                port: port, "GET /api/w HTTP/1.1\r\nHost: x\r\n\r\nGET /api/w HTTP/1.0\r\n\r\n",
                until: { $0.contains("malformed-request") && $0.hasSuffix("}\n") })
            // (The 200's body may be framed by its length, and end right before the next status line.)
            #expect(behind.hasPrefix("HTTP/1.1 200 OK\r\n") && behind.dropFirst(1).contains("HTTP/1.1 400 Bad Request\r\n"), "\(behind)")
            // Behind a request the server is still answering, the refusal waits its turn.
            let pipelined = try await rawExchange(
                port: port,
                "GET /api/w?wait=1&since=x HTTP/1.1\r\nHost: x\r\n\r\nGET /api/w HTTP/1.1\r\nX-Big: \(String(repeating: "b", count: 70_000))\r\n\r\n",
                until: { $0.hasSuffix(headersTooLarge) })
            let first = try #require(pipelined.range(of: "HTTP/1.1 "))
            let second = try #require(pipelined.range(of: "HTTP/1.1 431 "))
            #expect(first.lowerBound < second.lowerBound && !pipelined[first.lowerBound..<second.lowerBound].contains("431"))
            #expect(try await client.get("/api/w").status == .ok)
        }
    }

    @Test("A 5xx names no file, directory or database URL of the server: the detail is general, the error goes to the log")
    func serverErrorsSayLittle() async throws {
        try await Backend.sqlite.withDatabase { database, store, _ in
            var configuration = ServerConfiguration()
            configuration.port = 0
            configuration.writeToken = secret
            let app = buildApplication(store: store, earlyVerdicts: store, configuration: configuration)
            try await app.testOnServerThreads(.live) { client in
                _ = try await client.write(.post, "/api/w", #"[{"id":"a"}]"#)
                // A position no token can name: the store refuses the read as corrupt, naming its file.
                try await database.execute("UPDATE records SET position = 300000000000")
                let reply = try await client.get("/api/w")
                #expect(reply.status == .serviceUnavailable)
                #expect(reply.text.contains(#""type":"urn:deltasnap:problem:store-unavailable""#), "\(reply.text)")
                #expect(!reply.text.contains(database.location) && !reply.text.contains("store.sqlite"), "\(reply.text)")
                let health = try await client.get("/healthz")
                #expect(!health.text.contains(database.location), "\(health.text)")
            }
        }
    }
}

import DeltaCore
import DeltaServer
import DeltaStore
import DeltaTestSupport
import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
import Testing

@Suite("Cacheable reads: ?since=&until= and the 307 to them")
struct CacheableReadTests {
    static let redirect: HTTPFields = [HTTPField.Name("Delta-Redirect")!: "1"]

    /// The URL value of an entity tag: `W/"…"` without `W/` and quotes.
    static func urlValue(_ tag: String) -> String { String(tag.dropFirst(3).dropLast()) }

    @Test(
        "A conditional read that changed answers 307 to ?since=&until=, whose 200 is the direct answer byte for byte, immutable; the origin computes it once",
        arguments: Backend.available)
    func redirectsToImmutable(backend: Backend) async throws {
        try await withServer(.loopback, backend: backend, configure: { $0.cacheableReads = true }) { client, _ in
            _ = try await client.write(.post, "/api/w", #"[{"id":"a","v":1},{"id":"b","v":1},{"id":"c","v":1},{"id":"d","v":1}]"#)
            let old = try #require(try await client.get("/api/w").headers[.eTag])
            _ = try await client.write(.put, "/api/w/a", #"{"id":"a","v":2}"#)
            _ = try await client.write(.delete, "/api/w/b", "")
            let direct = try await client.get("/api/w", [.ifNoneMatch: old])
            let head = try #require(direct.headers[.eTag])
            #expect(direct.headers[.cacheControl] == "no-store", "without Delta-Redirect the answer is direct")

            var asked = Self.redirect
            asked[.ifNoneMatch] = old
            let moved = try await client.get("/api/w", asked)
            #expect(moved.status == .temporaryRedirect)
            #expect(moved.headers[.location] == "w?since=\(Self.urlValue(old))&until=\(Self.urlValue(head))")
            #expect(moved.headers[.cacheControl] == "no-store")
            #expect(moved.body.readableBytes == 0)

            let location = "/api/" + (moved.headers[.location] ?? "")
            let answer = try await client.get(location)
            #expect(answer.status == .ok)
            #expect(answer.headers[.cacheControl] == "public, max-age=31536000, immutable")
            #expect(answer.headers[.vary] == "Accept-Encoding")
            #expect(answer.headers[.eTag] == head)
            #expect(answer.headers[HTTPField.Name("Delta-Mode")!] == "delta")
            #expect(answer.headers[HTTPField.Name("Delta-Base")!] == old)
            #expect(answer.headers[HTTPField.Name("Delta-Digest")!] == direct.headers[HTTPField.Name("Delta-Digest")!])
            #expect(String(buffer: answer.body) == String(buffer: direct.body))
            #expect(String(buffer: answer.body) == #"{"w":[{"id":"a","v":2},{"hidden":true,"id":"b","v":1}]}"#)
            // Asked again: the same bytes, from memory, not from the database. The direct read
            // computed it, and kept it under this read's key (`ReadRoute+PublicAnswers`).
            let again = try await client.get(location)
            #expect(String(buffer: again.body) == String(buffer: answer.body) && again.headers[.eTag] == head)
            #expect(try await client.metric(#"deltasnap_public_answers_total{source="database"}"#) == 2, "the first full read, and the direct one")
            #expect(try await client.metric(#"deltasnap_cacheable_answers_total{source="database"}"#) == 0)
            #expect(try await client.metric(#"deltasnap_cacheable_answers_total{source="memory"}"#) == 2)
            #expect(try await client.metric("deltasnap_cacheable_redirects_total") == 1)

            // Unchanged: still a plain 304. No validator: a 307 to the full dataset at the head.
            var current = Self.redirect
            current[.ifNoneMatch] = head
            #expect(try await client.get("/api/w", current).status == .notModified)
            let full = try await client.get("/api/w", Self.redirect)
            #expect(full.headers[.location] == "w?until=\(Self.urlValue(head))")
            let fullAnswer = try await client.get("/api/" + (full.headers[.location] ?? ""))
            #expect(fullAnswer.headers[HTTPField.Name("Delta-Mode")!] == "full")
            #expect(String(buffer: fullAnswer.body) == String(buffer: try await client.get("/api/w").body))

            // The collection moves on: a cacheable read the origin has not kept redirects to the new
            // head (never cached); the one it kept is still exactly right, and stays.
            _ = try await client.write(.put, "/api/w/e", #"{"id":"e"}"#)
            let newer = try #require(try await client.get("/api/w").headers[.eTag])
            let stale = try await client.get("/api/w?since=\(Self.urlValue(old))&until=\(Self.urlValue(head))", [.acceptEncoding: "gzip"])
            #expect(stale.status == .temporaryRedirect && stale.headers[.cacheControl] == "no-store")
            #expect(stale.headers[.location] == "w?since=\(Self.urlValue(old))&until=\(Self.urlValue(newer))")
            #expect(String(buffer: try await client.get(location).body) == String(buffer: answer.body))
            // Both ends the same token: an empty delta.
            let same = try await client.get("/api/w?since=\(Self.urlValue(newer))&until=\(Self.urlValue(newer))")
            #expect(same.status == .ok)
            #expect(String(buffer: same.body) == #"{"w":[]}"#)
            #expect(same.headers[.eTag] == newer)
        }
    }

    @Test(
        "HEAD of a kept cacheable answer says what its GET says: the same status and headers, Content-Length the body's, no body; gzip-encoded or not",
        arguments: Backend.available)
    func headOfKeptAnswer(backend: Backend) async throws {
        try await withServer(.loopback, backend: backend, configure: { $0.cacheableReads = true }) { client, _ in
            _ = try await client.write(.post, "/api/w", #"[{"id":"a","v":1},{"id":"b","v":1},{"id":"c","v":1}]"#)
            let old = try #require(try await client.get("/api/w").headers[.eTag])
            _ = try await client.write(.put, "/api/w/a", #"{"id":"a","v":2}"#)
            var asked = Self.redirect
            asked[.ifNoneMatch] = old
            let location = "/api/" + (try #require(try await client.get("/api/w", asked).headers[.location]))
            /// The headers but `Date`, as sorted `name: value` lines (the early path and the router order them apart).
            func lines(_ headers: HTTPFields) -> [String] {
                headers.filter { $0.name != .date }.map { "\($0.name.canonicalName): \($0.value)" }.sorted()
            }
            for encoding: HTTPFields in [[:], [.acceptEncoding: "gzip"]] {
                let computed = try await client.get(location, encoding)
                let kept = try await client.get(location, encoding)
                let head = try await client.execute(uri: location, method: .head, headers: encoding)
                #expect(computed.status == .ok && kept.status == .ok && head.status == .ok)
                #expect(String(buffer: kept.body) == String(buffer: computed.body), "the second GET is the kept answer")
                #expect(kept.headers[.contentLength] == String(kept.body.readableBytes))
                #expect(head.headers[.contentLength] == kept.headers[.contentLength], "\(encoding)")
                #expect(head.headers[.eTag] == kept.headers[.eTag])
                #expect(lines(head.headers) == lines(kept.headers), "\(encoding)")
                #expect(head.body.readableBytes == 0)
            }
            #expect(try await client.metric(#"deltasnap_cacheable_answers_total{source="memory"}"#) == 4, "both HEADs from memory too")
        }
    }

    @Test(
        "A writing client's 307 carries Delta-Last-Mutation read with its until; a server without cacheableReads ignores Delta-Redirect",
        arguments: Backend.available)
    func lastMutationOnRedirect(backend: Backend) async throws {
        try await withServer(
            .loopback, backend: backend,
            configure: {
                $0.cacheableReads = true
                $0.clientKey = "client-key-456"
                $0.clientWritable = ["notes"]
            }
        ) { client, _ in
            _ = try await client.write(.put, "/api/notes/n0", #"{"id":"n0"}"#)
            let start = try #require(try await client.get("/api/notes").headers[.eTag])
            let pushed = try await client.write(
                .post, "/push",
                #"{"client":"c1","mutations":[{"id":1,"collection":"notes","op":"put","record":{"id":"n1"},"base":\#(String(reflecting: start))}]}"#,
                auth: "Bearer client-key-456")
            #expect(pushed.status == .ok)
            var headers = Self.redirect
            headers[.ifNoneMatch] = start
            headers[HTTPField.Name("Delta-Client")!] = "c1"
            let moved = try await client.get("/api/notes", headers)
            #expect(moved.status == .temporaryRedirect)
            #expect(moved.headers[HTTPField.Name("Delta-Last-Mutation")!] == "1")
            let answer = try await client.get("/api/" + (moved.headers[.location] ?? ""), [HTTPField.Name("Delta-Client")!: "c1"])
            #expect(answer.status == .ok && answer.headers[HTTPField.Name("Delta-Last-Mutation")!] == nil, "a shared answer never carries one client's header")
        }
        try await withServer(.loopback, backend: backend) { client, _ in
            _ = try await client.write(.put, "/api/w/a", #"{"id":"a"}"#)
            #expect(try await client.get("/api/w", Self.redirect).status == .ok)
        }
    }

    @Test("Selections: the 307 keeps filter and limit, and the cacheable answer is the direct one, with the selection's token", arguments: Backend.available)
    func selections(backend: Backend) async throws {
        try await withServer(.loopback, backend: backend, configure: { $0.cacheableReads = true }) { client, _ in
            _ = try await client.write(.post, "/api/w", #"[{"id":"a","n":1},{"id":"b","n":5},{"id":"c","n":9}]"#)
            let query = "filter=%7B%22n%22%3A%7B%22gte%22%3A5%7D%7D&limit=1"
            let first = try await client.get("/api/w?\(query)")
            let old = try #require(first.headers[.eTag])
            _ = try await client.write(.put, "/api/w/b", #"{"id":"b","n":6}"#)
            let direct = try await client.get("/api/w?\(query)", [.ifNoneMatch: old])
            var asked = Self.redirect
            asked[.ifNoneMatch] = old
            let moved = try await client.get("/api/w?\(query)", asked)
            let location = try #require(moved.headers[.location])
            #expect(location.hasPrefix("w?\(query)&since=\(Self.urlValue(old))&until="))
            let answer = try await client.get("/api/" + location)
            #expect(answer.status == .ok)
            #expect(answer.headers[.eTag] == direct.headers[.eTag])
            #expect(String(buffer: answer.body) == String(buffer: direct.body))
            #expect(String(buffer: answer.body) == #"{"w":[{"id":"b","n":6}]}"#)
        }
    }

    @Test(
        "Bad cacheable URLs: until malformed, a selection's, or ahead of the head get 400; since malformed or foreign resets (409); wait is refused",
        arguments: Backend.available)
    func refusals(backend: Backend) async throws {
        try await withServer(.loopback, backend: backend, configure: { $0.cacheableReads = true }) { client, _ in
            _ = try await client.write(.put, "/api/w/a", #"{"id":"a"}"#)
            let head = Self.urlValue(try #require(try await client.get("/api/w").headers[.eTag]))
            let parts = head.split(separator: ".").map(String.init)
            let ahead = [parts[0], parts[1], String(Int(parts[2])! + 5), parts[3]].joined(separator: ".")
            let foreign = [parts[0], "0123456789abcdef", parts[2], parts[3]].joined(separator: ".")
            for (query, status, type) in [
                ("until=nonsense", 400, "invalid-until"), ("since=\(head)", 400, "invalid-until"),
                ("until=\(head)&until=\(head)", 400, "invalid-until"), ("until=\(ahead)", 400, "invalid-until"),
                ("until=\(head).0123456789abcdef..\(String(repeating: "0", count: 64))", 400, "invalid-until"),
                ("since=garbage&until=\(head)", 409, "reset-required"), ("since=\(foreign)&until=\(head)", 409, "reset-required"),
                ("until=\(head)&wait=5", 400, "invalid-wait"),
            ] {
                let reply = try await client.get("/api/w?\(query)")
                #expect(Int(reply.status.code) == status, "\(query)")
                #expect(String(buffer: reply.body).contains(type), "\(query): \(String(buffer: reply.body))")
                #expect(reply.headers[.cacheControl] == "no-store", "\(query): a refusal is never cacheable")
            }
        }
    }
}

extension CacheableReadTests {
    @Test(
        "A kept cacheable answer is sent from the raw bytes, before the decoder, byte for byte as the router sends it but for the date, gzip-encoded or not",
        arguments: Backend.available)
    func keptAnswerEarly(backend: Backend) async throws {
        try await withServer(.loopback, backend: backend, configure: { $0.cacheableReads = true }) { client, _ in
            let port = try #require(client.port)
            _ = try await client.write(.post, "/api/w", #"[{"id":"a","v":1},{"id":"b","v":1},{"id":"c","v":1}]"#)
            let old = try #require(try await client.get("/api/w").headers[.eTag])
            _ = try await client.write(.put, "/api/w/a", #"{"id":"a","v":2}"#)
            var asked = Self.redirect
            asked[.ifNoneMatch] = old
            let location = try #require(try await client.get("/api/w", asked).headers[.location])
            func withoutDate(_ text: String) -> String {
                text.components(separatedBy: "\r\n").filter { !$0.hasPrefix("Date: ") }.joined(separator: "\r\n")
            }
            for encoding in ["", "Accept-Encoding: gzip\r\n"] {
                let computed = try await rawExchange(port: port, "GET /api/\(location) HTTP/1.1\r\nHost: x\r\n\(encoding)Connection: close\r\n\r\n") { _ in
                    false
                }
                let before = try await client.metric(#"deltasnap_cacheable_answers_total{source="memory"}"#)
                let earlyBefore = try await client.metric("deltasnap_early_cacheable_responses")
                // Kept-alive, then a request that closes the connection: the early answer is all before the second.
                let both = try await rawExchange(
                    port: port,
                    pieces: [
                        Array("GET /api/\(location) HTTP/1.1\r\nHost: x\r\n\(encoding)\r\n".utf8),
                        Array("GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".utf8),
                    ]
                ) { _ in false }
                let early = String(both[..<(both.range(of: "HTTP/1.1 200 OK\r\n", options: .backwards)?.lowerBound ?? both.endIndex)])
                let routed = try await rawExchange(port: port, "GET /api/\(location) HTTP/1.1\r\nHost: x\r\n\(encoding)Connection: close\r\n\r\n") { _ in false
                }
                #expect(try await client.metric(#"deltasnap_cacheable_answers_total{source="memory"}"#) == before + 2)
                #expect(try await client.metric("deltasnap_early_cacheable_responses") == earlyBefore + 1, "one of the two before the decoder")
                #expect(computed.contains("transfer-encoding: chunked"), "the first answer is computed and streamed")
                #expect(early.hasPrefix("HTTP/1.1 200 OK\r\nCache-Control: public, max-age=31536000, immutable\r\n"))
                #expect(withoutDate(early) == withoutDate(routed).replacingOccurrences(of: "Connection: close\r\n", with: ""), "\(encoding)")
            }
        }
    }
}

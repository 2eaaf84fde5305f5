import DeltaCore
import DeltaServer
import DeltaTestSupport
import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
import Testing

/// Live clients' waits held on the raw path (`WaitingRoom`): what each gets, in order, computed
/// once per group of identical requests, and for users always the router's answer.
@Suite("Live clients waiting on the raw path")
struct WaitingRoomTests {
    /// Whether `text` holds one whole answer to a `GET` (body by `Content-Length` or chunked) or a `HEAD`.
    static func whole(_ text: String, head: Bool) -> Bool {
        guard let end = text.range(of: "\r\n\r\n") else { return false }
        if head || text.hasPrefix("HTTP/1.1 304") { return true }
        if let length = field("Content-Length", in: text).flatMap(Int.init) {
            return text.utf8.count >= text.utf8.distance(from: text.startIndex, to: end.upperBound) + length
        }
        return text.hasSuffix("\r\n0\r\n\r\n")
    }

    /// The value of a field in an answer's header block.
    static func field(_ name: String, in text: String) -> String? {
        let head = text.components(separatedBy: "\r\n\r\n")[0]
        return head.components(separatedBy: "\r\n").dropFirst().first { $0.lowercased().hasPrefix(name.lowercased() + ":") }.map {
            String($0.dropFirst(name.count + 1)).trimmingCharacters(in: .whitespaces)
        }
    }

    /// The header block's lines but for `Date` and the body's framing, and the body (chunks joined).
    static func parts(_ text: String) -> (lines: [String], body: String) {
        let split = text.components(separatedBy: "\r\n\r\n")
        let framing = ["date:", "content-length:", "transfer-encoding:"]
        let lines = split[0].components(separatedBy: "\r\n").filter { line in !framing.contains { line.lowercased().hasPrefix($0) } }
        var body = split.dropFirst().joined(separator: "\r\n\r\n")
        if field("Transfer-Encoding", in: text) == "chunked" {
            var joined = ""
            var rest = Substring(body)
            while let line = rest.range(of: "\r\n"), let size = Int(rest[..<line.lowerBound], radix: 16), size > 0 {
                let start = rest.index(line.upperBound, offsetBy: 0)
                joined += rest.utf8[start...].prefix(size).map { String(UnicodeScalar($0)) }.joined()
                rest = rest[rest.utf8.index(start, offsetBy: size + 2)...]
            }
            body = joined
        }
        return (lines, body)
    }

    /// Polls `/metrics` until `name` reads `value` (20 s at most).
    static func until(_ client: any TestClientProtocol, _ name: String, is value: Int) async throws {
        let deadline = ContinuousClock.now + .seconds(20)
        while try await client.metric(name) != value {
            guard ContinuousClock.now < deadline else { throw TestFailure("\(name) never reached \(value) (\(try await client.metric(name)))") }
            try await Task.sleep(for: .milliseconds(20))
        }
    }

    @Test(
        "Clients waiting with the same bytes get one answer, computed once, that is the router's but for Date and framing; HEAD and GET alike",
        arguments: Backend.available)
    func sharedAnswers(backend: Backend) async throws {
        // Waits of 120 s: on a loaded machine (every suite at once on two cores, and a build beside
        // them) waits of 30 s once all ended in a 304 before the write that should end them; a
        // wake-up that is really lost still fails here, two minutes later.
        try await withServer(.loopback, backend: backend, configure: { $0.maximumWait = 120 }) { client, _ in
            let port = try #require(client.port)
            _ = try await client.write(.post, "/api/w", #"[{"id":"a","n":1}]"#)
            let etag = try #require(try await client.get("/api/w").header("ETag"))
            let head = "HEAD /api/w?wait=120 HTTP/1.1\r\nHost: 127.0.0.1\r\nIf-None-Match: \(etag)\r\n\r\n"
            let get = "GET /api/w?wait=120 HTTP/1.1\r\nHost: 127.0.0.1\r\nIf-None-Match: \(etag)\r\nAccept-Encoding: identity\r\n\r\n"
            let heads = (0..<12).map { _ in Task { try await rawExchange(port: port, head) { Self.whole($0, head: true) } } }
            let gets = (0..<6).map { _ in Task { try await rawExchange(port: port, get) { Self.whole($0, head: false) } } }
            try await Self.until(client, "deltasnap_waiting_requests", is: 18)
            let computed = try await client.metric("deltasnap_shared_answers_total")
            let sentBefore = try await client.metric(#"deltasnap_http_requests_total{route="/api/{collection}",method="HEAD",status="200"}"#)
            // A commit elsewhere ends no wait.
            _ = try await client.write(.put, "/api/other/x", #"{"id":"x"}"#)
            try await Task.sleep(for: .milliseconds(600))
            #expect(try await client.metric("deltasnap_waiting_requests") == 18)
            _ = try await client.write(.put, "/api/w/b", #"{"id":"b","n":2}"#)
            var headAnswers: [String] = []
            for task in heads { headAnswers.append(try await task.value) }
            var getAnswers: [String] = []
            for task in gets { getAnswers.append(try await task.value) }
            // The router's answers to the same requests without wait (Origin leaves them to the router).
            let routedHead = try await rawExchange(port: port, "HEAD /api/w HTTP/1.1\r\nHost: 127.0.0.1\r\nIf-None-Match: \(etag)\r\nOrigin: http://o\r\n\r\n")
            {
                Self.whole($0, head: true)
            }
            let routedGet = try await rawExchange(
                port: port, "GET /api/w HTTP/1.1\r\nHost: 127.0.0.1\r\nIf-None-Match: \(etag)\r\nAccept-Encoding: identity\r\nOrigin: http://o\r\n\r\n"
            ) { Self.whole($0, head: false) }
            #expect(routedHead.hasPrefix("HTTP/1.1 200 OK\r\n") && routedGet.hasPrefix("HTTP/1.1 200 OK\r\n"), "\(routedHead)\n\(routedGet)")
            #expect(Self.parts(routedGet).body == #"{"w":[{"id":"b","n":2}]}"#)
            for answer in headAnswers {
                #expect(Self.parts(answer).lines == Self.parts(routedHead).lines, "\(answer)")
                #expect(Self.field("Content-Length", in: answer) == Self.field("Content-Length", in: routedHead))
                #expect(Self.parts(answer).body.isEmpty)
            }
            for answer in getAnswers {
                #expect(Self.parts(answer).lines == Self.parts(routedGet).lines, "\(answer)")
                #expect(Self.parts(answer).body == #"{"w":[{"id":"b","n":2}]}"#, "\(answer)")
            }
            // One computation per group (HEAD, GET); each request counted as it is answered.
            #expect(try await client.metric("deltasnap_shared_answers_total") == computed + 2)
            #expect(
                try await client.metric(#"deltasnap_http_requests_total{route="/api/{collection}",method="HEAD",status="200"}"#) == sentBefore + 13)
            #expect(try await client.metric("deltasnap_waiting_requests") == 0)
        }
    }

    @Test(
        "A wait ends at its deadline in the router's 304; bytes pipelined behind a waiting request are answered after it, in order; a closed connection leaves the room, and so do waits pipelined before a half-close",
        arguments: Backend.available)
    func deadlinesOrderAndClosing(backend: Backend) async throws {
        try await withServer(.loopback, backend: backend) { client, _ in
            let port = try #require(client.port)
            _ = try await client.write(.post, "/api/w", #"[{"id":"a"}]"#)
            let etag = try #require(try await client.get("/api/w").header("ETag"))
            let started = ContinuousClock.now
            let quiet = try await rawExchange(port: port, "GET /api/w?wait=1 HTTP/1.1\r\nHost: 127.0.0.1\r\nIf-None-Match: \(etag)\r\n\r\n") {
                Self.whole($0, head: false)
            }
            #expect(ContinuousClock.now - started >= .milliseconds(900))
            let routed = try await rawExchange(port: port, "GET /api/w HTTP/1.1\r\nHost: 127.0.0.1\r\nIf-None-Match: \(etag)\r\nOrigin: http://o\r\n\r\n") {
                Self.whole($0, head: false)
            }
            #expect(quiet.hasPrefix("HTTP/1.1 304 Not Modified\r\n"), "\(quiet)")
            #expect(Self.parts(quiet).lines == Self.parts(routed).lines)
            // A wait, a revalidation and a record read pipelined: answered in the order sent, after the change.
            let pipelined = Task {
                try await rawExchange(
                    port: port,
                    "HEAD /api/w?wait=30 HTTP/1.1\r\nHost: x\r\nIf-None-Match: \(etag)\r\n\r\n"
                        + "GET /api/w HTTP/1.1\r\nHost: x\r\nIf-None-Match: \(etag)\r\n\r\n"
                        + "GET /api/w/a HTTP/1.1\r\nHost: x\r\n\r\n"
                ) { $0.components(separatedBy: "HTTP/1.1 ").count == 4 && $0.hasSuffix("}\n") }
            }
            try await Self.until(client, "deltasnap_waiting_requests", is: 1)
            _ = try await client.write(.put, "/api/w/b", #"{"id":"b"}"#)
            let answers = try await pipelined.value.components(separatedBy: "HTTP/1.1 ").dropFirst().map { "HTTP/1.1 " + $0 }
            #expect(answers.count == 3)
            #expect(answers.first?.hasPrefix("HTTP/1.1 200 OK\r\n") == true && Self.parts(answers[0]).body.isEmpty, "\(answers)")
            #expect(answers.dropFirst().first.map { Self.parts($0).body } == #"{"w":[{"id":"b"}]}"#, "\(answers)")
            #expect(answers.last.map { Self.parts($0).body } == #"{"id":"a"}"# + "\n", "\(answers)")
            // A client that goes away while it waits: the room lets it go at once.
            let current = try #require(try await client.get("/api/w").header("ETag"))
            let socket = try Self.send(port: port, "GET /api/w?wait=30 HTTP/1.1\r\nHost: x\r\nIf-None-Match: \(current)\r\n\r\n")
            try await Self.until(client, "deltasnap_waiting_requests", is: 1)
            close(socket)
            try await Self.until(client, "deltasnap_waiting_requests", is: 0)
            // Two waits pipelined, then the client's input ends: both end at once, in order, and
            // neither keeps a place in the room or waits in the router (on PostgreSQL the first is
            // still a round trip when the input ends).
            let wait = "GET /api/w?wait=30 HTTP/1.1\r\nHost: x\r\nIf-None-Match: \(current)\r\n\r\n"
            let halfClosed = ContinuousClock.now
            let both = try await rawExchange(port: port, pieces: [Array((wait + wait).utf8)], halfClose: true) {
                $0.components(separatedBy: "HTTP/1.1 ").count == 3
            }
            #expect(both.components(separatedBy: "HTTP/1.1 304 Not Modified\r\n").count == 3, "\(both)")
            #expect(ContinuousClock.now - halfClosed < .seconds(20), "the waits ended at their deadline, not with the input")
            try await Self.until(client, "deltasnap_waiting_requests", is: 0)
        }
    }

    @Test(
        "Users' waits wait on the raw path, each group theirs alone: only their rows, a change to another's rows ends no wait, and a 401, not a 304, once their token expires",
        arguments: Backend.available)
    func usersWaitApart(backend: Backend) async throws {
        let rules = #"{"collections":{"notes":{"read":{"owner":{"eq":{"$claim":"sub"}}}}}}"#
        try await withUserServer(backend: backend, rules: rules) { client, _ in
            let port = try #require(client.port)
            _ = try await client.write(.post, "/api/notes", #"[{"id":"n1","owner":"ada"},{"id":"n2","owner":"bob"}]"#)
            let ada = try await Mint.hs256("ada")
            let bob = try await Mint.hs256("bob")
            let adaTag = try #require(try await client.get("/api/notes", as: ada).header("ETag"))
            let bobTag = try #require(try await client.get("/api/notes", as: bob).header("ETag"))
            let computed = try await client.metric("deltasnap_shared_answers_total")
            // Each answer with when it came: a failure says whether a wait ran out (30 s) or ended early.
            func wait(_ token: String, _ tag: String) -> Task<(text: String, at: ContinuousClock.Instant), any Error> {
                Task {
                    let text = try await rawExchange(
                        port: port, "GET /api/notes?wait=30 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(token)\r\nIf-None-Match: \(tag)\r\n\r\n"
                    ) {
                        Self.whole($0, head: false)
                    }
                    return (text, ContinuousClock.now)
                }
            }
            let began = ContinuousClock.now
            let adaWaits = (0..<3).map { _ in wait(ada, adaTag) }
            let bobWaits = wait(bob, bobTag)
            try await Self.until(client, "deltasnap_waiting_requests", is: 4)
            // Bob's note: his wait ends with it alone; Ada's rows did not change, and she goes on waiting here.
            _ = try await client.write(.put, "/api/notes/n3", #"{"id":"n3","owner":"bob"}"#)
            let bobs = try await bobWaits.value.text
            #expect(Self.parts(bobs).body == #"{"notes":[{"id":"n3","owner":"bob"}]}"#, "\(bobs)")
            try await Self.until(client, "deltasnap_waiting_requests", is: 3)
            #expect(try await client.metric("deltasnap_shared_answers_total") == computed + 1)
            _ = try await client.write(.put, "/api/notes/n4", #"{"id":"n4","owner":"ada"}"#)
            let committed = ContinuousClock.now
            for answer in adaWaits {
                let (text, at) = try await answer.value
                let when = "answered \(at - began) after the waits began, \(at - committed) after n4's commit returned"
                #expect(text.hasPrefix("HTTP/1.1 200 OK\r\n"), "\(when): \(text)")
                #expect(Self.parts(text).body == #"{"notes":[{"id":"n4","owner":"ada"}]}"#, "\(when): \(text)")
                #expect(Self.field("Cache-Control", in: text) == "private, no-store")
            }
            // Ada's three identical requests: one answer of the router's, for her token.
            #expect(try await client.metric("deltasnap_shared_answers_total") == computed + 2)
            // A token that expires while it waits (in the leeway's last seconds): a commit then wakes
            // it, and the router answers 401, not the 304 its rows would give.
            let expiring = try await Mint.hs256("ada", ttl: -Int64(Authenticator.leeway) + 6)
            let expires = ContinuousClock.now + .seconds(6)
            // The tag is read with Ada's lasting token (the same rows, so the same tag). The expiring
            // one is verified here, so that the raw path holds its wait; on a loaded machine it may
            // expire first, and then the router holds it, and must answer the same.
            let current = try #require(try await client.get("/api/notes", as: ada).header("ETag"))
            _ = try await client.get("/api/notes", as: expiring)
            let late = Task {
                try await rawExchange(
                    port: port, "GET /api/notes?wait=30 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(expiring)\r\nIf-None-Match: \(current)\r\n\r\n"
                ) { Self.whole($0, head: false) }
            }
            // Parked while the token holds (on a loaded machine it may expire first: the router then answers 401 at once).
            while try await client.metric("deltasnap_waiting_requests") != 1, ContinuousClock.now < expires {
                try await Task.sleep(for: .milliseconds(20))
            }
            try await Task.sleep(until: expires + .seconds(1))
            _ = try await client.write(.put, "/api/notes/n5", #"{"id":"n5","owner":"bob"}"#)
            let answer401 = try await late.value
            #expect(answer401.hasPrefix("HTTP/1.1 401 "), "\(answer401)")
            #expect(answer401.contains("token-expired"), "\(answer401)")
        }
    }

    @Test(
        "Behind a real Varnish (docs/OPERATIONS.md): waits pass to the origin, one write wakes them all, and their syncs follow one 307 that Varnish fetches once",
        arguments: Backend.available)
    func behindVarnish(backend: Backend) async throws {
        try await withServer(.loopback, backend: backend, configure: { $0.cacheableReads = true }) { origin, _ in
            let directory = try makeTemporaryDirectory("varnish-waits")
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let varnishd = try requireProgram("varnishd", package: "varnish")
            let vcl = "\(directory)/waits.vcl"
            // The configuration docs/OPERATIONS.md gives, with a backend timeout above the longest wait.
            try """
            vcl 4.1;
            backend origin { .host = "127.0.0.1"; .port = "\(try #require(origin.port))"; .first_byte_timeout = 70s; }
            sub vcl_recv { if (req.url !~ "[?&]until=") { return (pass); } }
            """.write(toFile: vcl, atomically: true, encoding: .utf8)
            let (varnish, port) = try await startListening { port in
                try ChildProcess(
                    varnishd, ["-F", "-j", "none", "-a", "127.0.0.1:\(port)", "-f", vcl, "-n", "\(directory)/varnish-\(port)", "-s", "malloc,64m"])
            }
            defer { Task { await varnish.stop(SIGKILL) } }
            _ = try await origin.write(.post, "/api/w", #"[{"id":"a"}]"#)
            let etag = try #require(try await origin.get("/api/w").header("ETag"))
            let clients = 12
            let probes = (0..<clients).map { _ in
                Task {
                    try await rawExchange(port: port, "HEAD /api/w?wait=30 HTTP/1.1\r\nHost: x\r\nIf-None-Match: \(etag)\r\n\r\n") {
                        Self.whole($0, head: true)
                    }
                }
            }
            try await Self.until(origin, "deltasnap_waiting_requests", is: clients)
            _ = try await origin.write(.put, "/api/w/b", #"{"id":"b"}"#)
            for probe in probes { #expect(try await probe.value.hasPrefix("HTTP/1.1 200 OK\r\n")) }
            // Each client syncs as DeltaClient does: a 307 to the cacheable read, followed at once by all.
            let sync = "GET /api/w HTTP/1.1\r\nHost: x\r\nIf-None-Match: \(etag)\r\nDelta-Redirect: 1\r\n\r\n"
            let redirect = try await rawExchange(port: port, sync) { Self.whole($0, head: false) }
            let location = try #require(Self.field("Location", in: redirect), "\(redirect)")
            let follows = (0..<clients).map { _ in
                Task {
                    try await rawExchange(port: port, "GET /api/\(location) HTTP/1.1\r\nHost: x\r\nAccept-Encoding: identity\r\n\r\n") {
                        Self.whole($0, head: false)
                    }
                }
            }
            for follow in follows { #expect(try await Self.parts(follow.value).body == #"{"w":[{"id":"b"}]}"#) }
            #expect(try await origin.metric(#"deltasnap_cacheable_answers_total{source="database"}"#) == 1)
            #expect(try await origin.metric(#"deltasnap_cacheable_answers_total{source="memory"}"#) == 0, "Varnish fetched the answer more than once")
            await varnish.stop(SIGKILL)
        }
    }

    @Test(
        "A browser's cross-origin wait waits on the raw path too, and every answer it gets is the router's, CORS headers included: the change, and the 304 at its deadline",
        arguments: Backend.available)
    func crossOriginWaits(backend: Backend) async throws {
        let app = "https://app.example.com"
        try await withServer(.loopback, backend: backend, configure: { $0.crossOrigin = try? CrossOrigin([app]) }) { client, _ in
            let port = try #require(client.port)
            _ = try await client.write(.post, "/api/w", #"[{"id":"a"}]"#)
            let etag = try #require(try await client.get("/api/w").header("ETag"))
            let early = try await client.metric("deltasnap_early_not_modified_responses")
            func request(_ wait: String, origin: String = app) -> String {
                "HEAD /api/w\(wait) HTTP/1.1\r\nHost: x\r\nOrigin: \(origin)\r\nIf-None-Match: \(etag)\r\n\r\n"
            }
            // Without a wait, and at a wait's end, the 304 is the router's: CORS headers on it.
            let routed = try await rawExchange(port: port, request("")) { Self.whole($0, head: true) }
            #expect(Self.field("Access-Control-Allow-Origin", in: routed) == app, "\(routed)")
            let started = ContinuousClock.now
            let quiet = try await rawExchange(port: port, request("?wait=1")) { Self.whole($0, head: true) }
            #expect(ContinuousClock.now - started >= .milliseconds(900))
            #expect(quiet.hasPrefix("HTTP/1.1 304 Not Modified\r\n"), "\(quiet)")
            #expect(Self.parts(quiet).lines == Self.parts(routed).lines)
            #expect(Self.field("Content-Length", in: quiet) == nil, "a 304 names no length (RFC 9110, 8.6): \(quiet)")
            #expect(try await client.metric("deltasnap_early_not_modified_responses") == early, "a raw 304 answered a browser")
            // Waiting: on the raw path; the change's answer is the router's for that origin.
            let listed = (0..<3).map { _ in Task { try await rawExchange(port: port, request("?wait=30")) { Self.whole($0, head: true) } } }
            let other = Task { try await rawExchange(port: port, request("?wait=30", origin: "https://elsewhere.example.org")) { Self.whole($0, head: true) } }
            try await Self.until(client, "deltasnap_waiting_requests", is: 4)
            _ = try await client.write(.put, "/api/w/b", #"{"id":"b"}"#)
            for answer in listed {
                let text = try await answer.value
                #expect(text.hasPrefix("HTTP/1.1 200 OK\r\n") && Self.field("Access-Control-Allow-Origin", in: text) == app, "\(text)")
            }
            let elsewhere = try await other.value
            #expect(elsewhere.hasPrefix("HTTP/1.1 200 OK\r\n") && Self.field("Access-Control-Allow-Origin", in: elsewhere) == nil, "\(elsewhere)")
            #expect(try await client.metric("deltasnap_waiting_requests") == 0)
        }
    }

    @Test(
        "The idle timeout counts the raw path's answers: waits and revalidations one after another keep a connection, silence closes it",
        arguments: [Backend.sqlite])
    func idleTimeout(backend: Backend) async throws {
        try await withServer(
            .loopback, backend: backend,
            configure: {
                $0.idleTimeout = .seconds(3)
                $0.maximumWait = 2
            }
        ) { client, _ in
            // Only fresh connections: the test client's own could sit idle past the timeout on a loaded machine.
            let port = try #require(client.port)
            let body = #"{"id":"a"}"#
            let put = try await rawExchange(
                port: port,
                "PUT /api/w/a HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(secret)\r\nContent-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n\(body)"
            ) { Self.whole($0, head: false) }
            #expect(put.hasPrefix("HTTP/1.1 200 OK"), "\(put)")
            let read = try await rawExchange(port: port, "GET /api/w HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n") { Self.whole($0, head: false) }
            let etag = try #require(Self.field("ETag", in: read), "\(read)")
            // Three 2-second waits and then a revalidation, on one connection: 6 s of raw-path answers, twice the timeout.
            let wait = "HEAD /api/w?wait=2 HTTP/1.1\r\nHost: x\r\nIf-None-Match: \(etag)\r\n\r\n"
            let again = "GET /api/w HTTP/1.1\r\nHost: x\r\nIf-None-Match: \(etag)\r\n\r\n"
            let answers = try await Self.converse(port: port, [wait, wait, wait, again])
            #expect(answers.count == 4 && answers.allSatisfy { $0.hasPrefix("HTTP/1.1 304 Not Modified\r\n") }, "\(answers)")
            // Nothing sent: closed after about the timeout.
            let started = ContinuousClock.now
            let received = try await offThePool {
                let silent = try connectLoopback(port: port)
                defer { close(silent) }
                var byte: UInt8 = 0
                var timeout = timeval(tv_sec: 20, tv_usec: 0)
                setsockopt(silent, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
                return recv(silent, &byte, 1, 0)
            }
            #expect(received == 0, "the idle connection was not closed")
            let waited = ContinuousClock.now - started
            #expect(waited >= .milliseconds(2_500) && waited < .seconds(19), "closed after \(waited)")
        }
    }

    /// Sends each request on one connection after the answer to the one before (a client that
    /// waits for each answer), and returns the answers; fails if the connection closes first.
    static func converse(port: Int, _ requests: [String]) async throws -> [String] {
        try await offThePool {
            let fd = try connectLoopback(port: port)
            defer { close(fd) }
            var timeout = timeval(tv_sec: 30, tv_usec: 0)
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            var answers: [String] = []
            var buffer = [UInt8](repeating: 0, count: 65_536)
            for request in requests {
                guard Glibc.send(fd, request, request.utf8.count, 0) == request.utf8.count else { throw TestFailure("send() failed") }
                var received: [UInt8] = []
                while !Self.whole(String(decoding: received, as: UTF8.self), head: request.hasPrefix("HEAD")) {
                    let count = recv(fd, &buffer, buffer.count, 0)
                    guard count > 0 else { throw TestFailure("closed after \(answers.count) answers") }
                    received.append(contentsOf: buffer[0..<count])
                }
                answers.append(String(decoding: received, as: UTF8.self))
            }
            return answers
        }
    }

    @Test("A wait with more than a header block's worth pipelined behind it goes to the router with the rest, and leaves the room")
    func handedOver() async throws {
        try await withServer(.loopback) { client, _ in
            let port = try #require(client.port)
            _ = try await client.write(.post, "/api/w", #"[{"id":"a"}]"#)
            let etag = try #require(try await client.get("/api/w").header("ETag"))
            let computed = try await client.metric("deltasnap_shared_answers_total")
            let filler = "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Filler: \(String(repeating: "f", count: 180))\r\n\r\n"
            let request = "GET /api/w?wait=20 HTTP/1.1\r\nHost: x\r\nIf-None-Match: \(etag)\r\n\r\n" + String(repeating: filler, count: 45)
            let exchange = Task { try await rawExchange(port: port, request) { $0.components(separatedBy: "HTTP/1.1 ").count == 47 } }
            try await Self.until(client, "deltasnap_waiting_requests", is: 1)
            try await Task.sleep(for: .milliseconds(300))
            #expect(try await client.metric("deltasnap_waiting_requests") == 1, "counted in the room and in the router")
            _ = try await client.write(.put, "/api/w/b", #"{"id":"b"}"#)
            let answers = try await exchange.value.components(separatedBy: "HTTP/1.1 ").dropFirst()
            #expect(answers.count == 46 && answers.first?.hasPrefix("200 OK") == true, "\(answers.first ?? "")")
            #expect(answers.dropFirst().allSatisfy { $0.hasPrefix("200 OK") })
            #expect(try await client.metric("deltasnap_shared_answers_total") == computed, "an answer computed for nobody")
            try await Self.until(client, "deltasnap_waiting_requests", is: 0)
        }
    }

    /// Sends `request` on a connection of its own and returns its socket, left open.
    static func send(port: Int, _ request: String) throws -> Int32 {
        let fd = try connectLoopback(port: port)
        guard Glibc.send(fd, request, request.utf8.count, 0) == request.utf8.count else {
            close(fd)
            throw TestFailure("send() failed")
        }
        return fd
    }
}

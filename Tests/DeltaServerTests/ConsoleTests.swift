import DeltaCore
import DeltaRules
import DeltaStore
import DeltaTestSupport
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Logging
import NIOConcurrencyHelpers
import NIOCore
import Testing

@testable import DeltaServer

/// The operator's console (`--console`) over HTTP, in-process through the router: nothing of it
/// answers without a session, every state-changing request needs its session's CSRF token, the
/// sign-in checks the owner's secret and slows repeated failures, and what it shows of a user is
/// what the API answers that user. The browser half is Tests/Console/console_browser.py.
@Suite("The console: sessions, CSRF, sign-in, and reading as a user")
struct ConsoleTests {
    /// A server with the console, users and rules, over a store holding ada's and bob's notes.
    static func withConsole(
        _ backend: Backend = .sqlite, console: Bool = true, crossOrigin: Bool = false,
        _ body: @escaping @Sendable (any TestClientProtocol, any ChangeStore) async throws -> Void
    ) async throws {
        try await backend.withStore { store, _ in
            var configuration = ServerConfiguration()
            configuration.port = 0
            configuration.writeToken = secret
            configuration.console = console
            if crossOrigin { configuration.crossOrigin = try CrossOrigin(["https://app.example.com", "*"]) }
            let rules = try Rules(parsing: Array(exampleRules.utf8))
            configuration.rules = StoredRules(version: try await store.installRules(rules), rules: rules)
            configuration.authenticator = try await Authenticator(secret: userSecret, jwks: nil)
            _ = try await store.write(to: try CollectionName("notes")) { transaction in
                for (id, owner) in [("a1", "ada"), ("a2", "ada"), ("b1", "bob")] {
                    try await transaction.upsert(try Record(parsing: Array(#"{"id":"\#(id)","owner":"\#(owner)"}"#.utf8)))
                }
            }
            let app = buildApplication(store: store, earlyVerdicts: store, configuration: configuration)
            try await app.test(.router) { client in try await body(client, store) }
        }
    }

    /// Signs in: the session's cookie (`name=value`) and its CSRF token, read from a page.
    static func signIn(_ client: any TestClientProtocol, headers: HTTPFields = [:]) async throws -> (cookie: String, csrf: String) {
        var fields = headers
        fields[.contentType] = "application/x-www-form-urlencoded"
        let answer = try await client.execute(uri: "/console/sign-in", method: .post, headers: fields, body: ByteBuffer(string: "secret=\(secret)"))
        #expect(answer.status == .seeOther)
        let cookie = try #require(answer.headers[.setCookie]?.split(separator: ";").first.map(String.init))
        let page = String(buffer: try await client.execute(uri: "/console/overview", method: .get, headers: [.cookie: cookie]).body)
        let csrf = try #require(page.firstMatch(of: /name="csrf-token" content="([^"]+)"/)?.1)
        return (cookie, String(csrf))
    }

    @Test("Without a session, every page goes to the sign-in page and every JSON answer and action is 401; every answer carries the policy")
    func nothingWithoutASession() async throws {
        try await Self.withConsole { client, store in
            let console = Console(
                store: store, configuration: ServerConfiguration(), metrics: ServerMetrics(),
                longPoll: LongPoll(store: store, maximumWaiting: 1, metrics: ServerMetrics()), responder: LateResponder(), logger: .init(label: "test"))
            var checked = 0
            for route in console.routes {
                // A cookie that names no session is none.
                for headers: HTTPFields in [[:], [.cookie: "\(ConsoleSessions.cookieName)=forged"]] {
                    let answer = try await client.execute(uri: route.path, method: route.method, headers: headers, body: ByteBuffer(string: "{}"))
                    let context = "\(route.method) \(route.path) \(headers): \(answer.status)"
                    #expect(answer.headers[HTTPField.Name("Content-Security-Policy")!]?.contains("script-src 'self'") == true, "\(context)")
                    switch route.handler {
                    case .open: #expect(answer.status != .unauthorized, "\(context)")
                    case .page:
                        #expect(answer.status == .seeOther && answer.headers[.location] == "/console/sign-in", "\(context)")
                    case .data, .action:
                        #expect(answer.status == .unauthorized, "\(context)")
                        #expect(String(buffer: answer.body).contains("console-sign-in-required"), "\(context)")
                        // Nothing of the data: no note, no collection name.
                        #expect(!String(buffer: answer.body).contains("notes"), "\(context)")
                    }
                    checked += 1
                }
            }
            #expect(checked == console.routes.count * 2)
            // No route, or a route's path with a method it does not take: 404, with the policy too.
            for (method, path) in [(HTTPRequest.Method.get, "/console/nothing"), (.post, "/console/overview"), (.delete, "//console/api/overview")] {
                let answer = try await client.execute(uri: path, method: method, headers: [:])
                #expect(answer.status == .notFound, "\(method) \(path)")
                #expect(String(buffer: answer.body).contains("not-found"), "\(method) \(path)")
                #expect(answer.headers[HTTPField.Name("Content-Security-Policy")!]?.contains("script-src 'self'") == true, "\(method) \(path)")
            }
            let api = try await client.execute(uri: "/api/nothing/at/all", method: .get, headers: [:])
            #expect(api.headers[HTTPField.Name("Content-Security-Policy")!] == nil, "the API's own 404 is the API's")
        }
    }

    @Test("A wrong secret is 401 and repeated ones are slowed (429 with Retry-After); the right one gives a strict cookie, Secure behind TLS")
    func signIn() async throws {
        try await Self.withConsole { client, _ in
            let form: HTTPFields = [.contentType: "application/x-www-form-urlencoded"]
            let page = try await client.execute(uri: "/console/sign-in", method: .get, headers: [:])
            #expect(page.status == .ok && String(buffer: page.body).contains(#"name="secret" type="password""#))
            #expect(!String(buffer: page.body).contains(secret))
            let (cookie, _) = try await Self.signIn(client, headers: [HTTPField.Name("X-Forwarded-Proto")!: "https"])
            #expect(cookie.hasPrefix("\(ConsoleSessions.cookieName)="))
            let plain = try await client.execute(uri: "/console/sign-in", method: .post, headers: form, body: ByteBuffer(string: "secret=\(secret)"))
            let attributes = try #require(plain.headers[.setCookie])
            #expect(attributes.contains("HttpOnly") && attributes.contains("SameSite=Strict") && attributes.contains("Path=/console"))
            #expect(attributes.contains("Max-Age=28800") && !attributes.contains("Secure"))
            let secure = try await client.execute(
                uri: "/console/sign-in", method: .post, headers: form + [HTTPField.Name("X-Forwarded-Proto")!: "https"],
                body: ByteBuffer(string: "secret=\(secret)"))
            #expect(secure.headers[.setCookie]?.contains("; Secure") == true)
            // A signed-in browser at the sign-in page goes on to the overview.
            #expect(try await client.execute(uri: "/console/sign-in", method: .get, headers: [.cookie: cookie]).headers[.location] == "/console/overview")
            for attempt in 1...SignInThrottle.freeFailures {
                let wrong = try await client.execute(uri: "/console/sign-in", method: .post, headers: form, body: ByteBuffer(string: "secret=guess-\(attempt)"))
                #expect(wrong.status == .unauthorized && wrong.headers[.setCookie] == nil)
                #expect(String(buffer: wrong.body).contains("The secret is wrong."))
            }
            // Guessing on, as an attacker would: each wait must be waited out (429 with Retry-After
            // until then), and each wrong secret after it doubles the next, until it is 4 s.
            var retryAfter = 0
            for attempt in 0..<12 where retryAfter < 4 {
                let answer = try await client.execute(uri: "/console/sign-in", method: .post, headers: form, body: ByteBuffer(string: "secret=more-\(attempt)"))
                if answer.status == .tooManyRequests {
                    retryAfter = Int(answer.headers[.retryAfter] ?? "") ?? 0
                    #expect(retryAfter >= 1 && answer.headers[.setCookie] == nil)
                    if retryAfter < 4 { try await Task.sleep(for: .seconds(retryAfter)) }
                } else {
                    #expect(answer.status == .unauthorized)
                }
            }
            #expect(retryAfter >= 4)
            // Now even the right secret waits: it is not compared until the wait is over.
            let slowed = try await client.execute(uri: "/console/sign-in", method: .post, headers: form, body: ByteBuffer(string: "secret=\(secret)"))
            #expect(slowed.status == .tooManyRequests && slowed.headers[.setCookie] == nil)
        }
    }

    @Test(
        "A state-changing request needs its session's CSRF token, in the header or the form, and is refused from another site",
        arguments: Backend.available)
    func csrf(backend: Backend) async throws {
        try await Self.withConsole(backend) { client, store in
            let (cookie, csrf) = try await Self.signIn(client)
            let json: HTTPFields = [.cookie: cookie, .contentType: "application/json"]
            let hide = ByteBuffer(string: #"{"collection":"notes","id":"a1"}"#)
            for headers: HTTPFields in [json, json + [ConsoleResponse.csrfHeader: "a-guess"], json + [ConsoleResponse.csrfHeader: csrf + "x"]] {
                let refused = try await client.execute(uri: "/console/api/record/hide", method: .post, headers: headers, body: hide)
                #expect(refused.status == .forbidden && String(buffer: refused.body).contains("console-csrf"))
            }
            let crossSite = try await client.execute(
                uri: "/console/api/record/hide", method: .post,
                headers: json + [ConsoleResponse.csrfHeader: csrf, HTTPField.Name("Sec-Fetch-Site")!: "cross-site"], body: hide)
            #expect(crossSite.status == .forbidden && String(buffer: crossSite.body).contains("console-cross-site"))
            #expect(try await store.record("a1", in: try CollectionName("notes"))?.record.hidden == false)
            let done = try await client.execute(uri: "/console/api/record/hide", method: .post, headers: json + [ConsoleResponse.csrfHeader: csrf], body: hide)
            #expect(done.status == .ok)
            #expect(try await store.record("a1", in: try CollectionName("notes"))?.record.hidden == true)
            // A form carries the token as a field.
            let form: HTTPFields = [.cookie: cookie, .contentType: "application/x-www-form-urlencoded"]
            let noToken = try await client.execute(uri: "/console/snapshot", method: .post, headers: form, body: ByteBuffer(string: "collection=notes"))
            #expect(noToken.status == .forbidden)
            // A collection users read by rule is never baked from the console: its snapshot would ship their rows.
            let restricted = try await client.execute(
                uri: "/console/snapshot", method: .post, headers: form, body: ByteBuffer(string: "csrf=\(csrf)&collection=notes"))
            #expect(restricted.status == .forbidden && String(buffer: restricted.body).contains("console-not-public"))
            // Signing out ends the session: its cookie opens nothing after.
            let out = try await client.execute(uri: "/console/sign-out", method: .post, headers: form, body: ByteBuffer(string: "csrf=\(csrf)"))
            #expect(out.status == .seeOther && out.headers[.setCookie]?.contains("Max-Age=0") == true)
            #expect(try await client.execute(uri: "/console/api/overview", method: .get, headers: [.cookie: cookie]).status == .unauthorized)
        }
    }

    @Test(
        "The Users page shows a user the rows the API answers them, and explains a record; a request from outside never reads as a user",
        arguments: Backend.available)
    func readingAsAUser(backend: Backend) async throws {
        try await Self.withConsole(backend) { client, store in
            // Public rows too large to list (21 of 300 KB: past the page's 4 MB): said so, not "200: OK".
            _ = try await store.write(to: try CollectionName("airports")) { transaction in
                for index in 0..<21 {
                    try await transaction.upsert(try Record(parsing: Array(#"{"id":"p\#(index)","text":"\#(String(repeating: "x", count: 300_000))"}"#.utf8)))
                }
            }
            let (cookie, csrf) = try await Self.signIn(client)
            let check = try await client.execute(
                uri: "/console/api/users/check", method: .post,
                headers: [.cookie: cookie, .contentType: "application/json", ConsoleResponse.csrfHeader: csrf],
                body: ByteBuffer(string: #"{"claims":{"sub":"ada"},"collection":"notes","id":"b1"}"#))
            #expect(check.status == .ok)
            let answer = try JSONValue(parsing: check.body.readableBytesView)
            guard case .array(let collections)? = answer["collections"] else {
                Issue.record("no collections: \(String(buffer: check.body))")
                return
            }
            let notes = collections.first { $0["name"] == .string("notes") }
            #expect(notes?["rows"]?["ids"] == .array([.string("a1"), .string("a2")]))
            let airports = collections.first { $0["name"] == .string("airports") }?["rows"]
            #expect(
                airports?["status"] == .int(200) && airports?["error"]?.text?.contains("take more than 4 MB: not listed here") == true, "\(airports ?? .null)")
            guard case .array(let lines)? = answer["explanation"]?["lines"] else {
                Issue.record("no explanation: \(String(buffer: check.body))")
                return
            }
            #expect(lines.first?["operation"] == .string("read") && lines.first?["allowed"] == .bool(false))
            // The API itself, asked with no credential, still refuses: reading as a user is the console's alone.
            #expect(try await client.execute(uri: "/api/notes", method: .get, headers: [:]).status == .unauthorized)
            // A token is verified as the API verifies it.
            let expired = try await Mint.hs256("ada", ttl: -120)
            let refused = try await client.execute(
                uri: "/console/api/users/check", method: .post,
                headers: [.cookie: cookie, .contentType: "application/json", ConsoleResponse.csrfHeader: csrf],
                body: ByteBuffer(string: #"{"token":"\#(expired)"}"#))
            #expect(refused.status == .unauthorized && String(buffer: refused.body).contains("token-expired"))
        }
    }

    @Test(
        "An action takes the body kind it declares (415 otherwise, never read twice); + is a space in queries; large bodies are previews",
        arguments: Backend.available)
    func bodiesAndQueries(backend: Backend) async throws {
        try await Self.withConsole(backend) { client, store in
            let (cookie, csrf) = try await Self.signIn(client)
            let form = try await client.execute(
                uri: "/console/api/compact", method: .post,
                headers: [.cookie: cookie, ConsoleResponse.csrfHeader: csrf, .contentType: "application/x-www-form-urlencoded"],
                body: ByteBuffer(string: "before=1"))
            #expect(form.status == .unsupportedMediaType && String(buffer: form.body).contains("console-body"))
            let json = try await client.execute(
                uri: "/console/snapshot", method: .post, headers: [.cookie: cookie, .contentType: "application/json"],
                body: ByteBuffer(string: #"{"csrf":"\#(csrf)"}"#))
            #expect(json.status == .unsupportedMediaType)
            let old = try await client.execute(
                uri: "/console/api/compact", method: .post, headers: [.cookie: cookie, ConsoleResponse.csrfHeader: csrf, .contentType: "application/json"],
                body: ByteBuffer(string: #"{"olderThan":"1e300d"}"#))
            #expect(old.status == .badRequest, "an age past any commit is refused, not trapped")
            let notes = try CollectionName("notes")
            let large = String(repeating: "x", count: Console.previewBytes)
            _ = try await store.write(to: notes) { transaction in
                try await transaction.upsert(try Record(parsing: Array(#"{"id":"a b","owner":"ada"}"#.utf8)))
                try await transaction.upsert(try Record(parsing: Array(#"{"id":"a+b","owner":"ada","text":"\#(large)"}"#.utf8)))
            }
            let spaced = try await client.execute(uri: "/console/api/record?collection=notes&id=a+b", method: .get, headers: [.cookie: cookie])
            #expect(try JSONValue(parsing: spaced.body.readableBytesView)["id"] == .string("a b"), "a form's + is a space")
            let plus = try await client.execute(uri: "/console/api/record?collection=notes&id=a%2Bb", method: .get, headers: [.cookie: cookie])
            let record = try JSONValue(parsing: plus.body.readableBytesView)
            #expect(record["id"] == .string("a+b"))
            guard case .array(let versions)? = record["versions"] else {
                Issue.record("no versions: \(String(buffer: plus.body))")
                return
            }
            // The current body whole (under a megabyte); in a page's list, a preview and the size.
            #expect(versions.first?["body"] != .null)
            let page = try await client.execute(uri: "/console/api/records?collection=notes&after=a", method: .get, headers: [.cookie: cookie])
            let listed = String(buffer: page.body)
            #expect(listed.contains(#""preview":"#) && !listed.contains(large) && page.body.readableBytes < 8_000)
        }
    }

    @Test("The console's answers carry no CORS header, however its path is written")
    func noCrossOrigin() async throws {
        try await Self.withConsole(crossOrigin: true) { client, _ in
            let (cookie, _) = try await Self.signIn(client)
            for path in ["/console/api/overview", "//console/api/overview", "/console//api/overview"] {
                let answer = try await client.execute(uri: path, method: .get, headers: [.cookie: cookie, .origin: "https://app.example.com"])
                #expect(answer.status == .ok && answer.headers[.accessControlAllowOrigin] == nil, "\(path)")
                let preflight = try await client.execute(
                    uri: path, method: .options, headers: [.origin: "https://app.example.com", .accessControlRequestMethod: "POST"])
                #expect(preflight.headers[.accessControlAllowOrigin] == nil, "\(path)")
            }
        }
    }

    @Test("Without --console there is no console")
    func absentByDefault() async throws {
        try await Self.withConsole(console: false) { client, _ in
            for path in ["/console/sign-in", "/console/overview", "/console/api/overview"] {
                let answer = try await client.execute(uri: path, method: .get, headers: [:])
                #expect(answer.status == .notFound)
            }
        }
    }

    @Test("Sessions end at their idle limit and lifetime; the throttle waits 1, 2, 4 s after the free failures and a success resets it")
    func sessionsAndThrottle() {
        let now = TestClock(ContinuousClock.now)
        let sessions = ConsoleSessions(clock: { now.value })
        let (cookie, session) = sessions.start()
        #expect(sessions.session(cookie)?.csrf == session.csrf)
        #expect(sessions.session(cookie + "x") == nil)
        now.advance(ConsoleSessions.idleLimit - .seconds(1))
        #expect(sessions.session(cookie) != nil)
        now.advance(ConsoleSessions.idleLimit - .seconds(1))
        #expect(sessions.session(cookie) != nil, "each use renews the idle limit")
        now.advance(ConsoleSessions.idleLimit + .seconds(1))
        #expect(sessions.session(cookie) == nil, "idle too long")
        let (second, _) = sessions.start()
        for _ in 0..<9 {
            now.advance(ConsoleSessions.idleLimit - .seconds(1))
            _ = sessions.session(second)
        }
        #expect(sessions.session(second) == nil, "past its lifetime however used")
        let throttle = SignInThrottle(clock: { now.value })
        for _ in 0..<SignInThrottle.freeFailures {
            #expect(throttle.begin("a") == .compare)
            // One attempt of an address at a time: those sent together wait for it.
            #expect(throttle.begin("a") == .wait(.seconds(1), log: false))
            throttle.end("a", success: false)
        }
        #expect(throttle.begin("a") == .wait(.seconds(1), log: true))
        #expect(throttle.begin("a") == .wait(.seconds(1), log: false), "one log line per wait")
        #expect(throttle.begin("b") == .compare, "another address is not slowed")
        // IPv6 addresses count by their /64; an IPv4-mapped address as its IPv4 address.
        #expect(SignInThrottle.key(of: "2001:db8:1:2:aaaa::1") == "2001:db8:1:2::/64")
        #expect(SignInThrottle.key(of: "2001:DB8:1:2::ffff") == "2001:db8:1:2::/64")
        #expect(SignInThrottle.key(of: "2001:db8:1:3::1") == "2001:db8:1:3::/64")
        #expect(SignInThrottle.key(of: "::ffff:192.0.2.7") == "192.0.2.7")
        #expect(SignInThrottle.key(of: "192.0.2.7") == "192.0.2.7")
        #expect(SignInThrottle.key(of: "unknown") == "unknown")
        for host in 1...SignInThrottle.freeFailures {
            #expect(throttle.begin("2001:db8:9:9::\(host)") == .compare)
            throttle.end("2001:db8:9:9::\(host)", success: false)
        }
        #expect(throttle.begin("2001:db8:9:9:ffff::1") == .wait(.seconds(1), log: true), "a new address in the same /64 waits")
        #expect(throttle.begin("2001:db8:9:a::1") == .compare, "the next /64 does not")
        throttle.end("2001:db8:9:a::1", success: true)
        throttle.end("b", success: true)
        now.advance(.seconds(1))
        #expect(throttle.begin("a") == .compare)
        throttle.end("a", success: false)
        #expect(throttle.begin("a") == .wait(.seconds(2), log: true))
        now.advance(.seconds(2))
        #expect(throttle.begin("a") == .compare)
        throttle.end("a", success: true)
        #expect(throttle.begin("a") == .compare, "a right secret resets its address")
    }

    @Test("The traffic history counts answers, 304s and latencies per minute over the last hour")
    func trafficHistory() {
        let now = TestClock(ContinuousClock.now)
        let start = Date(timeIntervalSince1970: 1_800_000_000)
        let history = TrafficHistory(now: { start.addingTimeInterval(TimeInterval(now.elapsed.components.seconds)) })
        for index in 0..<100 { history.record(status: index < 40 ? 304 : 200, microseconds: index < 98 ? 300 : 80_000) }
        history.record(status: 200, microseconds: nil)
        var summary = history.summary()
        #expect(summary.minutes.count == 60)
        #expect(summary.minutes.last?.requests == 101 && summary.minutes.last?.notModified == 40)
        #expect(summary.minutes.last?.p50 == 0.5 && summary.minutes.last?.p99 == 100)
        #expect(summary.total.requests == 101)
        now.advance(.seconds(3_600))
        summary = history.summary()
        #expect(summary.total.requests == 0 && summary.minutes.allSatisfy { $0.requests == 0 }, "an hour later it is gone")
    }

    @Test("The compiled-in script and style are the files in Console/Assets (Scripts/console-assets.sh), and pages escape what they show")
    func assetsAndEscaping() throws {
        let assets = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Sources/DeltaServer/Console/Assets")
        #expect(try String(contentsOf: assets.appendingPathComponent("console.js"), encoding: .utf8) == ConsoleAssets.scriptText + "\n")
        #expect(try String(contentsOf: assets.appendingPathComponent("console.css"), encoding: .utf8) == ConsoleAssets.styleText + "\n")
        #expect(ConsolePage.escape(#"<script>"a"&'b'</script>"#) == "&lt;script&gt;&quot;a&quot;&amp;&#39;b&#39;&lt;/script&gt;")
        #expect(!ConsoleAssets.scriptText.contains("innerHTML") && !ConsoleAssets.scriptText.contains("eval("))
    }
}

extension HTTPFields {
    /// These fields and `extra`'s.
    fileprivate static func + (fields: HTTPFields, extra: HTTPFields) -> HTTPFields {
        var all = fields
        all.append(contentsOf: extra)
        return all
    }
}

/// A test clock's instant, moved by hand.
final class TestClock: Sendable {
    private let box: NIOLockedValueBox<ContinuousClock.Instant>
    private let start: ContinuousClock.Instant

    init(_ instant: ContinuousClock.Instant) {
        box = NIOLockedValueBox(instant)
        start = instant
    }

    var value: ContinuousClock.Instant { box.withLockedValue { $0 } }
    var elapsed: Duration { value - start }
    func advance(_ duration: Duration) { box.withLockedValue { $0 += duration } }
}

import DeltaCore
import DeltaServer
import DeltaStore
import DeltaTestSupport
import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
import Testing

/// `--allow-origin`: the CORS answers a browser needs, over real HTTP on loopback (the raw `304`
/// path must hand a browser's request to the router, which adds them). The browser's side of it
/// is exercised by the TypeScript client's Chromium tests.
@Suite("Cross-origin reads and writes from browsers: --allow-origin")
struct CrossOriginTests {
    static let app = "https://app.example.com"
    static let elsewhere = "https://elsewhere.example.org"
    static let exposed = HTTPField.Name("Access-Control-Expose-Headers")!

    static func configure(_ values: [String]) -> (inout ServerConfiguration) -> Void {
        { configuration in
            configuration.crossOrigin = try? CrossOrigin(values)
            configuration.cacheableReads = true
            configuration.clientKey = "client-key-123"
            configuration.clientWritable = ["w"]
        }
    }

    @Test("Origins are read as browsers send them; anything else is refused with the reason")
    func parsing() throws {
        let allowed = try CrossOrigin(["HTTPS://App.Example.com:443", "http://localhost:5173", "*"])
        #expect(allowed.origins == ["https://app.example.com", "http://localhost:5173"])
        #expect(allowed.anyOriginReads)
        #expect(try CrossOrigin(["*"]).origins.isEmpty)
        #expect(try CrossOrigin(["*"]).anyOriginReads)
        for (value, reason) in [
            ("https://app.example.com/", "no path"), ("https://app.example.com/app", "no path"), ("null", "sandboxed"),
            ("ftp://x.example", "http:// or https://"),
            ("app.example.com", "http:// or https://"), ("https://", "http:// or https://"),
        ] {
            #expect {
                _ = try CrossOrigin([value])
            } throws: { error in
                "\(error)".hasPrefix("--allow-origin \(value): not an origin: ") && "\(error)".contains(reason)
            }
        }
    }

    @Test("A listed origin's preflight allows the client's methods and headers; another origin's gets no permission", arguments: Backend.available)
    func preflight(backend: Backend) async throws {
        try await withServer(.loopback, backend: backend, configure: Self.configure([Self.app])) { client, _ in
            let asked: HTTPFields = [.origin: Self.app, .accessControlRequestMethod: "GET", .accessControlRequestHeaders: "authorization,if-none-match"]
            let answer = try await client.execute(uri: "/api/w", method: .options, headers: asked)
            #expect(answer.status == .noContent)
            #expect(answer.headers[.accessControlAllowOrigin] == Self.app)
            #expect(answer.headers[.accessControlAllowMethods] == "GET, HEAD, PUT, POST, DELETE")
            let headers = Set((answer.headers[.accessControlAllowHeaders] ?? "").split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) })
            #expect(headers.isSuperset(of: ["Authorization", "If-None-Match", "If-Modified-Since", "Content-Type", "Delta-Client", "Delta-Redirect"]))
            #expect(answer.headers[.accessControlMaxAge] == "7200")
            #expect(answer.headers[.accessControlAllowCredentials] == nil, "the API takes no cookies")
            #expect(answer.headers[values: .vary].contains("Origin"))

            var other = asked
            other[.origin] = Self.elsewhere
            let refused = try await client.execute(uri: "/api/w", method: .options, headers: other)
            #expect(refused.headers[.accessControlAllowOrigin] == nil && refused.headers[.accessControlAllowMethods] == nil)
            #expect(refused.headers[.accessControlAllowHeaders] == nil)
        }
    }

    @Test(
        "A listed origin's reads (200, 304 from the raw path's connection, 307, problems) and pushes carry its permission and expose the Delta headers",
        arguments: Backend.available)
    func answers(backend: Backend) async throws {
        try await withServer(.loopback, backend: backend, configure: Self.configure([Self.app])) { client, _ in
            _ = try await client.write(.post, "/api/w", #"[{"id":"a","v":1}]"#)
            let full = try await client.get("/api/w", [.origin: Self.app])
            #expect(full.status == .ok)
            #expect(full.headers[.accessControlAllowOrigin] == Self.app)
            let exposed = Set((full.headers[Self.exposed] ?? "").split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) })
            #expect(
                exposed.isSuperset(of: [
                    "ETag", "Last-Modified", "Delta-Mode", "Delta-Base", "Delta-Digest", "Delta-Reset", "Delta-Last-Mutation", "Location", "Retry-After",
                ]))
            #expect(full.headers[values: .vary].joined(separator: ",").contains("Origin"))
            let tag = try #require(full.headers[.eTag])

            // Unchanged: the raw path would answer this 304 without CORS headers; a browser's is the router's.
            let notModified = try await client.get("/api/w", [.origin: Self.app, .ifNoneMatch: tag])
            #expect(notModified.status == .notModified)
            #expect(notModified.headers[.accessControlAllowOrigin] == Self.app)
            let plain = try await client.get("/api/w", [.ifNoneMatch: tag])
            #expect(plain.status == .notModified && plain.headers[.accessControlAllowOrigin] == nil)
            // On a fresh connection, the raw reader before the decoder hands it over too.
            let raw = try await rawExchange(
                port: try #require(client.port), "GET /api/w HTTP/1.1\r\nHost: 127.0.0.1\r\nOrigin: \(Self.app)\r\nIf-None-Match: \(tag)\r\n\r\n"
            ) { $0.hasSuffix("\r\n\r\n") }
            #expect(raw.hasPrefix("HTTP/1.1 304") && raw.contains("Access-Control-Allow-Origin: \(Self.app)\r\n"), "\(raw)")

            // Changed, asked to redirect: the 307 and the cacheable read it names, each with its permission;
            // the cacheable read names Origin in Vary so that a cache keeps one copy per origin.
            _ = try await client.write(.put, "/api/w/a", #"{"id":"a","v":2}"#)
            let moved = try await client.get("/api/w", [.origin: Self.app, .ifNoneMatch: tag, HTTPField.Name("Delta-Redirect")!: "1"])
            #expect(moved.status == .temporaryRedirect && moved.headers[.accessControlAllowOrigin] == Self.app)
            let location = "/api/" + (moved.headers[.location] ?? "")
            let cacheable = try await client.get(location, [.origin: Self.app])
            #expect(cacheable.status == .ok && cacheable.headers[.accessControlAllowOrigin] == Self.app)
            #expect(cacheable.headers[.vary] == "Accept-Encoding, Origin")
            let kept = try await client.get(location)
            #expect(kept.headers[.vary] == "Accept-Encoding, Origin" && kept.headers[.accessControlAllowOrigin] == nil)

            // A problem is readable by the page too: why it was refused.
            let missing = try await client.get("/api/not%20a%20name", [.origin: Self.app])
            #expect(missing.status.code >= 400 && missing.status.code < 500)
            #expect(missing.headers[.accessControlAllowOrigin] == Self.app)
            let push = try await client.execute(
                uri: "/push", method: .post, headers: [.origin: Self.app, .authorization: "Bearer client-key-123", .contentType: "application/json"],
                body: ByteBuffer(string: #"{"client":"c1","mutations":[{"id":1,"collection":"w","op":"put","record":{"id":"b"},"base":null}]}"#))
            #expect(push.status == .ok, "\(String(buffer: push.body))")
            #expect(push.headers[.accessControlAllowOrigin] == Self.app)

            // Another origin: the answer, without any permission for its page to read it.
            let other = try await client.get("/api/w", [.origin: Self.elsewhere])
            #expect(other.status == .ok && other.headers[.accessControlAllowOrigin] == nil && other.headers[Self.exposed] == nil)
        }
    }

    @Test(
        "'*' lets any page make public reads only: no credential, no write; a listed origin keeps its own permission; answers vary on Origin",
        arguments: Backend.available)
    func anyOrigin(backend: Backend) async throws {
        try await withServer(.loopback, backend: backend, configure: Self.configure(["*"])) { client, _ in
            _ = try await client.write(.post, "/api/w", #"[{"id":"a","v":1}]"#)
            // Asked without Origin (curl, an app): no CORS header, so a cache must keep it apart from a browser's.
            let plain = try await client.get("/api/w")
            #expect(plain.headers[.accessControlAllowOrigin] == nil && plain.headers[values: .vary].joined(separator: ",").contains("Origin"))
            let tag = try #require(plain.headers[.eTag])
            _ = try await client.write(.put, "/api/w/a", #"{"id":"a","v":2}"#)
            let moved = try await client.get("/api/w", [.ifNoneMatch: tag, HTTPField.Name("Delta-Redirect")!: "1"])
            let cacheable = try await client.get("/api/" + (moved.headers[.location] ?? ""))
            #expect(cacheable.headers[.vary] == "Accept-Encoding, Origin", "a shared cache keeps browsers' copies apart")
        }
        try await withServer(.loopback, backend: backend, configure: Self.configure(["*", Self.app])) { client, _ in
            _ = try await client.write(.post, "/api/w", #"[{"id":"a","v":1}]"#)
            let read = try await client.get("/api/w", [.origin: Self.elsewhere])
            #expect(read.status == .ok && read.headers[.accessControlAllowOrigin] == "*")
            let withKey = try await client.get("/api/w", [.origin: Self.elsewhere, .authorization: "Bearer client-key-123"])
            #expect(withKey.headers[.accessControlAllowOrigin] == nil)
            let preflight = try await client.execute(
                uri: "/push", method: .options,
                headers: [.origin: Self.elsewhere, .accessControlRequestMethod: "POST", .accessControlRequestHeaders: "authorization,content-type"])
            #expect(preflight.headers[.accessControlAllowOrigin] == "*")
            #expect(preflight.headers[.accessControlAllowMethods] == "GET, HEAD")
            #expect(!(preflight.headers[.accessControlAllowHeaders] ?? "").contains("Authorization"))
            let listed = try await client.get("/api/w", [.origin: Self.app])
            #expect(listed.headers[.accessControlAllowOrigin] == Self.app)
        }
    }

    @Test("Without --allow-origin, no answer carries a CORS header")
    func none() async throws {
        try await withServer(.loopback) { client, _ in
            let read = try await client.get("/api/w", [.origin: Self.app])
            #expect(read.headers[.accessControlAllowOrigin] == nil && read.headers[Self.exposed] == nil)
            #expect(!read.headers[values: .vary].joined().contains("Origin"))
        }
    }
}

/// The command line's side: `deltasnap serve --allow-origin` refuses what is not an origin before it opens anything.
@Suite("deltasnap serve --allow-origin")
struct CrossOriginCommandTests {
    @Test("serve refuses an --allow-origin that is not an origin, saying why, and names the flag in --help")
    func refusesNonOrigins() async throws {
        let refused = try await runProgram(
            try deltasnapExecutable(), ["serve", "--db", "/nonexistent/x.sqlite", "--allow-origin", "https://app.example.com/app"])
        #expect(refused.status != 0)
        #expect(refused.printed.contains("--allow-origin https://app.example.com/app: not an origin: an origin has no path"), "\(refused.printed)")
        let help = try await runProgram(try deltasnapExecutable(), ["serve", "--help"])
        #expect(help.status == 0 && help.printed.contains("--allow-origin <origin>"))
    }
}

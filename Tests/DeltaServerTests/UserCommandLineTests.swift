import DeltaCore
import DeltaTestSupport
import Foundation
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

@Suite("Users through the command line: serve --rules, token, rules check/explain, log, bake --as-claims")
struct UserCommandLineTests {
    let directory: String

    init() throws {
        directory = try makeTemporaryDirectory("deltasnap-users")
    }

    static func run(_ arguments: [String], environment: [String: String] = [:]) async throws -> (status: Int32, printed: String) {
        let process = try ChildProcess(try deltasnapExecutable(), arguments, environment: environment)
        return (await process.stop(0, timeout: .seconds(60)), process.printed)
    }

    /// One request to the running server: status, ETag and body.
    static func request(_ url: String, method: String = "GET", bearer: String?, body: String? = nil, etag: String? = nil) async throws -> (Int, String?, String)
    {
        var request = URLRequest(url: URL(string: url)!)
        request.httpMethod = method
        request.cachePolicy = .reloadIgnoringLocalCacheData
        if let bearer { request.setValue("Bearer \(bearer)", forHTTPHeaderField: "Authorization") }
        if let etag { request.setValue(etag, forHTTPHeaderField: "If-None-Match") }
        if let body {
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
            request.httpBody = Data(body.utf8)
        }
        let (data, response) = try await URLSession.shared.data(for: request)
        let http = response as! HTTPURLResponse
        return (http.statusCode, http.value(forHTTPHeaderField: "ETag"), String(decoding: data, as: UTF8.self))
    }

    @Test("A walk-through: serve with rules, a token from deltasnap token, each user's rows, a push logged with its user, a bake for one user")
    func walkThrough() async throws {
        let db = "\(directory)/app.sqlite"
        let rules = "\(directory)/rules.json"
        try Data(UserRulesTests.rules.utf8).write(to: URL(fileURLWithPath: rules))
        let checked = try await Self.run(["rules", "check", rules])
        #expect(checked.status == 0)
        #expect(checked.printed.contains("posts: read by rule; users write; reads rows of members; claims sub"), "\(checked.printed)")
        #expect(checked.printed.contains("airports: public"))
        let notes = "\(directory)/notes.json"
        try Data(#"[{"id":"a1","owner":"ada"},{"id":"b1","owner":"bob"}]"#.utf8).write(to: URL(fileURLWithPath: notes))
        #expect(try await Self.run(["import", "--db", db, "--collection", "notes", notes]).status == 0)
        let environment = ["DELTASNAP_WRITE_TOKEN": secret, "DELTASNAP_JWT_SECRET": userSecret]
        let server = try ChildProcess(try deltasnapExecutable(), ["serve", "--db", db, "--port", "0", "--rules", rules], environment: environment)
        let port = try await server.announcedPort()
        defer { Task { _ = await server.stop(SIGTERM, timeout: .seconds(10)) } }
        #expect(server.announcement.contains("users under rules version 1"), "\(server.announcement)")

        let token = try await Self.run(["token", "--sub", "ada", "--claim", #"teams=["red"]"#, "--ttl", "15m"], environment: environment)
        #expect(token.status == 0, "\(token.printed)")
        let jwt = token.printed.trimmingCharacters(in: .whitespacesAndNewlines)
        let payload = try #require(Data(base64Encoded: Self.padded(String(jwt.split(separator: ".")[1]))))
        let claims = try JSONValue(parsing: Array(payload))
        #expect(claims["sub"] == .string("ada"))
        #expect(claims["teams"] == .array([.string("red")]))
        if case .number(let exp)? = claims["exp"], case .number(let iat)? = claims["iat"] { #expect(Int(exp)! - Int(iat)! == 900) }

        let base = "http://127.0.0.1:\(port)"
        let (status, etag, body) = try await Self.request("\(base)/api/notes", bearer: jwt)
        #expect(status == 200)
        #expect(body == #"{"notes":[{"id":"a1","owner":"ada"}]}"#)
        #expect(try await Self.request("\(base)/api/notes", bearer: nil).0 == 401)
        #expect(try await Self.request("\(base)/api/notes", bearer: jwt, etag: etag).0 == 304)
        #expect(try await Self.request("\(base)/api/notes/b1", bearer: jwt).0 == 404)
        #expect(try await Self.request("\(base)/api/notes/a1", bearer: jwt).0 == 200)

        let push = #"{"client":"ada-cli","mutations":[{"id":1,"collection":"notes","op":"put","record":{"id":"a2","text":"hi"},"base":null,"create":true}]}"#
        let pushed = try await Self.request("\(base)/push", method: "POST", bearer: jwt, body: push)
        #expect(pushed.0 == 200 && pushed.2.contains(#""status":"applied""#), "\(pushed.2)")
        let log = try await Self.run(["log", "--db", db, "--collection", "notes", "--json"])
        #expect(log.printed.contains(#""client":"ada-cli","id":"a2","mutation":1,"op":"put""#), "\(log.printed)")
        #expect(log.printed.contains(#""user":"ada"}"#))

        let explained = try await Self.run(["rules", "explain", "--db", db, "--rules", rules, "--claims", #"{"sub":"bob"}"#, "--collection", "notes", "a1"])
        #expect(explained.printed.contains("notes/a1 for bob: stored"), "\(explained.printed)")
        #expect(explained.printed.contains(#"read:   denied (read / {"owner":{"eq":"bob"}})"#), "\(explained.printed)")

        let refused = try await Self.run(["bake", "--db", db, "--collection", "notes", "--out", "\(directory)/all.snapshot"])
        #expect(refused.status != 0)
        #expect(refused.printed.contains("collection notes: the rules (version 1) restrict it to its users"), "\(refused.printed)")
        let baked = try await Self.run(["bake", "--db", db, "--collection", "notes", "--as-claims", #"{"sub":"ada"}"#, "--out", "\(directory)/ada.snapshot"])
        #expect(baked.printed.contains("baked 2 records of notes"), "\(baked.printed)")
        let inspected = try await Self.run(["inspect", "\(directory)/ada.snapshot"])
        let bakedTag = try #require(
            inspected.printed.split(separator: "\n").first { $0.contains("W/\"1.") }.flatMap { line in
                line.range(of: "W/\"").map { "W/\"" + line[$0.upperBound...].prefix { $0 != "\"" } + "\"" }
            })
        // Ada's app starts from that snapshot: its token is hers, so the first sync is a 304.
        #expect(try await Self.request("\(base)/api/notes", bearer: jwt, etag: bakedTag).0 == 304, "\(bakedTag)")
        // An app's bundle: the public airports whole, the users' notes empty (baked for nobody).
        let airports = "\(directory)/airports.json"
        try Data(#"[{"id":"p1","name":"Paris"}]"#.utf8).write(to: URL(fileURLWithPath: airports))
        #expect(try await Self.run(["import", "--db", db, "--collection", "airports", airports]).status == 0)
        let bundle = try await Self.run([
            "bake", "--db", db, "--collection", "airports", "--collection", "notes", "--as-claims", #"{"sub":"nobody"}"#, "--out",
            "\(directory)/bundle.snapshot",
        ])
        #expect(bundle.printed.contains("baked 1 records of airports, notes"), "\(bundle.printed)")
        let bob = try await Self.run(["token", "--sub", "bob"], environment: environment)
        let stolen = try await Self.request("\(base)/api/notes", bearer: bob.printed.trimmingCharacters(in: .whitespacesAndNewlines), etag: bakedTag)
        #expect(stolen.0 == 409 && stolen.2.contains("user-changed"))
    }

    @Test("serve refuses unsafe user settings, and rules check names the place of an error")
    func refusals() async throws {
        let rules = "\(directory)/rules.json"
        try Data(#"{"collections":{"notes":{"read":{"owner":{"eq":{"$claims":"sub"}}}}}}"#.utf8).write(to: URL(fileURLWithPath: rules))
        let checked = try await Self.run(["rules", "check", rules])
        // A wrong file is not a wrong command line: exit 1, the error alone, no usage line.
        #expect(checked.status == 1, "\(checked.printed)")
        #expect(checked.printed.contains("(at /collections/notes/read/owner/eq"), "\(checked.printed)")
        #expect(!checked.printed.contains("Usage:"), "\(checked.printed)")
        let db = "\(directory)/x.sqlite"
        for (arguments, environment, says) in [
            (["--rules", rules], [String: String](), "--rules needs a way to verify users' tokens"),
            (["--rules", rules, "--jwt-secret", "short"], [:], "--jwt-secret must be at least 32 bytes"),
            (["--jwt-secret", userSecret], [:], "user tokens need rules"),
            (["--rules", rules, "--jwt-secret", userSecret, "--grant-ttl", "5s"], [:], "--grant-ttl: not a duration from 60 s to 7 d"),
            (["--rules", rules, "--jwt-secret", userSecret, "--jwks-refresh", "0s"], [:], "--jwks-refresh: not a duration from 1 s to 1 h"),
        ] {
            let result = try await Self.run(["serve", "--db", db, "--port", "0"] + arguments, environment: environment)
            #expect(result.status != 0)
            #expect(result.printed.contains(says), "\(result.printed)")
        }
        let token = try await Self.run(["token", "--sub", "ada"])
        #expect(token.status != 0 && token.printed.contains("DELTASNAP_JWT_SECRET"), "\(token.printed)")
    }

    @Test("serve --jwks FILE: a key set file that breaks is logged at error, once, and the last good set stays in force")
    func brokenKeySet() async throws {
        let db = "\(directory)/keys.sqlite"
        let rules = "\(directory)/rules.json"
        try Data(UserTokenTests.rules.utf8).write(to: URL(fileURLWithPath: rules))
        let notes = "\(directory)/notes.json"
        try Data(#"[{"id":"a1","owner":"ada"}]"#.utf8).write(to: URL(fileURLWithPath: notes))
        #expect(try await Self.run(["import", "--db", db, "--collection", "notes", notes]).status == 0)
        let keys = try await TestKeys.make()
        let jwks = "\(directory)/jwks.json"
        try Data(try keys.jwks().utf8).write(to: URL(fileURLWithPath: jwks))
        let server = try ChildProcess(
            try deltasnapExecutable(), ["serve", "--db", db, "--port", "0", "--rules", rules, "--jwks", jwks], environment: ["DELTASNAP_WRITE_TOKEN": secret])
        let port = try await server.announcedPort()
        let url = "http://127.0.0.1:\(port)/api/notes"
        let token = try await Mint.signed("ES256", keys, "ada")
        #expect(try await Self.request(url, bearer: token).0 == 200)
        try Data(#"{"keys":[{"kty":"EC","#.utf8).write(to: URL(fileURLWithPath: jwks))
        for _ in 0..<3 {
            try await Task.sleep(for: .milliseconds(1100))
            #expect(try await Self.request(url, bearer: token).0 == 200)
        }
        _ = await server.stop(SIGTERM, timeout: .seconds(10))
        let printed = server.printed
        let lines = printed.split(separator: "\n").filter { $0.contains("the last good set stays in force") }
        #expect(lines.count == 1, "\(printed)")
        #expect(lines.first.map { $0.contains(" error ") && $0.contains("not a JWK Set") } == true, "\(lines)")
    }

    @Test("rules install changes a running server's rules without a restart; bake --as-claims takes collections in any order, an unwritten one empty")
    func installAndBake() async throws {
        let db = "\(directory)/live.sqlite"
        let rules = "\(directory)/rules.json"
        try Data(UserRulesTests.rules.utf8).write(to: URL(fileURLWithPath: rules))
        let airports = "\(directory)/airports.json"
        try Data(#"[{"id":"p1","name":"Paris"},{"id":"p2","name":"Rome"}]"#.utf8).write(to: URL(fileURLWithPath: airports))
        #expect(try await Self.run(["import", "--db", db, "--collection", "airports", airports]).status == 0)
        let installed = try await Self.run(["rules", "install", "--db", db, rules])
        #expect(installed.status == 0 && installed.printed.contains("installed as rules version 1"), "\(installed.printed)")
        // notes: named by the rules, written by nobody yet; the collections named out of order.
        let out = "\(directory)/bundle.snapshot"
        let baked = try await Self.run([
            "bake", "--db", db, "--collection", "notes", "--collection", "airports", "--as-claims", #"{"sub":"ada"}"#, "--out", out,
        ])
        #expect(baked.status == 0 && baked.printed.contains("baked 2 records of airports, notes"), "\(baked.printed)")
        let verified = try await Self.run(["verify", out])
        #expect(verified.status == 0 && verified.printed.contains(": ok, 2 records in 2 collections"), "\(verified.printed)")

        // Without --rules, a server that verifies users takes the database's rules.
        let environment = ["DELTASNAP_WRITE_TOKEN": secret, "DELTASNAP_JWT_SECRET": userSecret]
        let server = try ChildProcess(try deltasnapExecutable(), ["serve", "--db", db, "--port", "0"], environment: environment)
        let port = try await server.announcedPort()
        defer { Task { _ = await server.stop(SIGTERM, timeout: .seconds(10)) } }
        #expect(server.announcement.contains("users under rules version 1"), "\(server.announcement)")
        let base = "http://127.0.0.1:\(port)"
        #expect(try await Self.request("\(base)/api/airports", bearer: nil).0 == 200)
        let owned = "\(directory)/owned.json"
        try Data(UserRulesTests.rules.replacingOccurrences(of: "airports", with: "ports").utf8).write(to: URL(fileURLWithPath: owned))
        let changed = try await Self.run(["rules", "install", "--db", db, owned])
        #expect(changed.status == 0 && changed.printed.contains("installed as rules version 2"), "\(changed.printed)")
        let again = try await Self.run(["rules", "install", "--db", db, owned])
        #expect(again.printed.contains("the database holds these rules already (version 2)"), "\(again.printed)")
        // The server follows by itself (it asks twice a second): wait for the change, not for a
        // time (bounded only to fail rather than hang on a loaded machine).
        let start = ContinuousClock.now
        var status = try await Self.request("\(base)/api/airports", bearer: nil).0
        while status != 401, ContinuousClock.now - start < .seconds(60) {
            try await Task.sleep(for: .milliseconds(50))
            status = try await Self.request("\(base)/api/airports", bearer: nil).0
        }
        #expect(status == 401)
    }

    @Test("A snapshot baked --as-claims for a user: that user's first sync revalidates its tokens (304s), nothing downloaded again")
    func asClaimsFirstSync() async throws {
        let db = "\(directory)/claims.sqlite"
        let rules = "\(directory)/rules.json"
        try Data(UserRulesTests.rules.utf8).write(to: URL(fileURLWithPath: rules))
        for (collection, rows) in [("airports", #"[{"id":"p1","name":"Paris"}]"#), ("notes", #"[{"id":"a1","owner":"ada"},{"id":"b1","owner":"bob"}]"#)] {
            let file = "\(directory)/\(collection).json"
            try Data(rows.utf8).write(to: URL(fileURLWithPath: file))
            #expect(try await Self.run(["import", "--db", db, "--collection", collection, file]).status == 0)
        }
        #expect(try await Self.run(["rules", "install", "--db", db, rules]).status == 0)
        let out = "\(directory)/ada.snapshot"
        let baked = try await Self.run([
            "bake", "--db", db, "--collection", "airports", "--collection", "notes", "--as-claims", #"{"sub":"ada"}"#, "--out", out,
        ])
        #expect(baked.status == 0, "\(baked.printed)")
        let environment = ["DELTASNAP_WRITE_TOKEN": secret, "DELTASNAP_JWT_SECRET": userSecret]
        let server = try ChildProcess(try deltasnapExecutable(), ["serve", "--db", db, "--port", "0"], environment: environment)
        let port = try await server.announcedPort()
        defer { Task { _ = await server.stop(SIGTERM, timeout: .seconds(10)) } }
        let token = "\(directory)/ada.jwt"
        try Data(try await Mint.hs256("ada").utf8).write(to: URL(fileURLWithPath: token))
        let sync = try await Self.run([
            "sync", "--store", "\(directory)/ada.sqlite", "--snapshot", out, "--url", "http://127.0.0.1:\(port)/api", "--token-file", token,
        ])
        #expect(sync.status == 0, "\(sync.printed)")
        #expect(sync.printed.contains("airports: not modified") && sync.printed.contains("notes: not modified"), "\(sync.printed)")
    }

    static func padded(_ text: String) -> String {
        let standard = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        return standard + String(repeating: "=", count: (4 - standard.count % 4) % 4)
    }
}

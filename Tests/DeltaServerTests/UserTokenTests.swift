import Crypto
import DeltaCore
import DeltaServer
import DeltaStore
import DeltaTestSupport
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import JWTKit
import NIOCore
import Testing

@Suite("Users' tokens: real keys, every refusal its 401 and problem type")
struct UserTokenTests {
    static let rules = #"{"collections":{"public":{"read":true},"notes":{"read":{"owner":{"eq":{"$claim":"sub"}}}}}}"#

    /// A JWK Set file with the test keys.
    func jwksFile(_ keys: TestKeys, suffix: String = "") throws -> (URL, JWKSLocation) {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("jwks-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let file = directory.appendingPathComponent("jwks.json")
        try Data(try keys.jwks(suffix: suffix).utf8).write(to: file)
        return (file, .file(file.path))
    }

    func seed(_ client: some TestClientProtocol) async throws {
        let written = try await client.write(.post, "/api/notes", #"[{"id":"a1","owner":"ada"},{"id":"b1","owner":"bob"}]"#)
        #expect(written.status == .ok)
    }

    @Test("ES256, EdDSA, RS256 from a JWK Set and HS256 from the secret each sign a user in", arguments: Backend.available)
    func algorithms(backend: Backend) async throws {
        let keys = try await TestKeys.make()
        let (_, jwks) = try jwksFile(keys)
        try await withUserServer(backend: backend, rules: Self.rules, jwks: jwks) { client, _ in
            try await seed(client)
            var tokens = [try await Mint.hs256("ada")]
            for algorithm in ["ES256", "EdDSA", "RS256"] { tokens.append(try await Mint.signed(algorithm, keys, "ada")) }
            for token in tokens {
                let response = try await client.get("/api/notes", as: token)
                #expect(response.status == .ok, "\(token.prefix(40))")
                #expect(response.text == #"{"notes":[{"id":"a1","owner":"ada"}]}"#)
                #expect(response.header("Cache-Control") == "private, no-store")
                #expect(response.header("Vary")?.hasSuffix(", Authorization") == true)
            }
        }
    }

    /// Every way a token is refused, and the problem type that names it.
    static func refusals(_ keys: TestKeys) async throws -> [(String, String, String)] {
        let now = Mint.now
        let good = try await Mint.hs256("ada")
        let parts = good.split(separator: ".").map(String.init)
        var flipped = Array(
            Data(base64Encoded: Base64URLText.fromStandard(parts[2]).replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/") + "=")!)
        flipped[0] ^= 1
        let rsaPEM = keys.rs256.publicKey.pemRepresentation
        // An ES256 token's signature cut to 40 bytes, and the same signature DER-encoded (as
        // OpenSSL and most libraries return it, not as JWS wants it: R and S, 64 bytes).
        let es = try await Mint.signed("ES256", keys, "ada").split(separator: ".").map(String.init)
        let raw = try #require(Base64URLText.decode(es[2]))
        let der = Array(try Crypto.P256.Signing.ECDSASignature(rawRepresentation: raw).derRepresentation)
        return [
            ("bad base64", "ab$c.def.ghi", "token-malformed"),
            ("two parts", parts[0] + "." + parts[1], "token-malformed"),
            ("header not JSON", Base64URLText.encode("nope") + "." + parts[1] + "." + parts[2], "token-malformed"),
            ("exp a string", Mint.raw(header: #"{"alg":"HS256"}"#, payload: #"{"sub":"ada","exp":"tomorrow"}"#), "token-malformed"),
            ("no exp", Mint.raw(header: #"{"alg":"HS256"}"#, payload: #"{"sub":"ada"}"#), "token-malformed"),
            ("sub a number", Mint.raw(header: #"{"alg":"HS256"}"#, payload: #"{"sub":7,"exp":\#(now + 3600)}"#), "token-malformed"),
            ("aud a number", Mint.raw(header: #"{"alg":"HS256"}"#, payload: #"{"sub":"ada","aud":1,"exp":\#(now + 3600)}"#), "token-malformed"),
            ("crit header", Mint.raw(header: #"{"alg":"HS256","crit":["x"]}"#, payload: #"{"sub":"ada","exp":\#(now + 3600)}"#), "token-malformed"),
            ("60 KB, under the 64 KiB header limit", String(repeating: "a", count: 60_000) + "." + String(repeating: "b", count: 10) + ".c", "token-malformed"),
            (
                "alg none", Base64URLText.encode(#"{"alg":"none"}"#) + "." + Base64URLText.encode(#"{"sub":"ada","exp":\#(now + 3600)}"#) + ".",
                "token-algorithm"
            ),
            ("alg HS512", Mint.raw(header: #"{"alg":"HS512"}"#, payload: #"{"sub":"ada","exp":\#(now + 3600)}"#), "token-algorithm"),
            (
                "HS256 signed with the RSA public key, naming its kid",
                Mint.raw(header: #"{"alg":"HS256","kid":"rsa-1"}"#, payload: #"{"sub":"ada","exp":\#(now + 3600)}"#, secret: rsaPEM), "token-algorithm"
            ),
            ("ES256 header on the RSA key", try await Mint.signed("ES256", keys, "ada", kid: "rsa-1"), "token-algorithm"),
            ("signature bit flip", parts[0] + "." + parts[1] + "." + Base64URLText.encode(flipped), "token-signature"),
            ("another secret", try await Mint.hs256("ada", secret: "another-secret-0123456789abcdef-01234"), "token-signature"),
            ("expired", Mint.raw(header: #"{"alg":"HS256"}"#, payload: #"{"sub":"ada","exp":\#(now - 61)}"#), "token-expired"),
            ("nbf ahead", Mint.raw(header: #"{"alg":"HS256"}"#, payload: #"{"sub":"ada","exp":\#(now + 7200),"nbf":\#(now + 3600)}"#), "token-not-yet-valid"),
            ("iat ahead", Mint.raw(header: #"{"alg":"HS256"}"#, payload: #"{"sub":"ada","exp":\#(now + 7200),"iat":\#(now + 3600)}"#), "token-not-yet-valid"),
            ("wrong issuer", Mint.raw(header: #"{"alg":"HS256"}"#, payload: #"{"sub":"ada","exp":\#(now + 3600),"iss":"evil","aud":"app"}"#), "token-issuer"),
            (
                "wrong audience", Mint.raw(header: #"{"alg":"HS256"}"#, payload: #"{"sub":"ada","exp":\#(now + 3600),"iss":"idp","aud":["web"]}"#),
                "token-audience"
            ),
            ("unknown kid", try await Mint.signed("ES256", keys, "ada", kid: "ec-9"), "token-key-unknown"),
            (
                "unknown kid, not ASCII, with a quote and a control character", try await Mint.signed("ES256", keys, "ada", kid: "clé-\"ключ\"\u{7}"),
                "token-key-unknown"
            ),
            ("ES256 signature cut short", es[0] + "." + es[1] + "." + Base64URLText.encode(Array(raw.prefix(40))), "token-signature"),
            ("ES256 signature DER-encoded", es[0] + "." + es[1] + "." + Base64URLText.encode(der), "token-signature"),
            ("ES256 signature empty", es[0] + "." + es[1] + ".", "token-signature"),
        ]
    }

    @Test("Each refused token: 401, its problem type, WWW-Authenticate error=invalid_token, never a 5xx or a row", arguments: Backend.available)
    func refusals(backend: Backend) async throws {
        let keys = try await TestKeys.make()
        let (_, jwks) = try jwksFile(keys)
        try await withUserServer(backend: backend, rules: Self.rules, jwks: jwks, issuer: "idp", audience: "app") { client, _ in
            try await seed(client)
            // Minted once the server is up, and an hour ahead: a loaded machine once took over 60 s
            // (the leeway) between minting and checking a token 120 s ahead, no longer ahead then.
            let cases = try await Self.refusals(keys)
            for (name, token, type) in cases {
                let response = try await client.get("/api/notes", as: token)
                #expect(response.status == .unauthorized, "\(name): \(response.status) \(response.text)")
                #expect(response.header("Content-Type") == "application/problem+json", "\(name)")
                #expect(response.text.contains(#""type":"urn:deltasnap:problem:\#(type)""#), "\(name): \(response.text)")
                let challenge = response.header("WWW-Authenticate") ?? ""
                #expect(challenge.hasPrefix(#"Bearer realm="deltasnap", error="invalid_token", error_description=""#), "\(name): \(challenge)")
                // RFC 6750 §3: error_description is printable ASCII without '"' and '\', whatever the token held.
                let description = challenge.utf8.dropFirst(#"Bearer realm="deltasnap", error="invalid_token", error_description=""#.utf8.count).dropLast()
                #expect(description.allSatisfy { (0x20...0x7E).contains($0) && $0 != 0x22 && $0 != 0x5C }, "\(name): \(challenge.debugDescription)")
                #expect(challenge.hasSuffix("\""), "\(name)")
                #expect(!response.text.contains("a1") && !response.text.contains("b1"), "\(name)")
            }
            // The accepted form for this server, for contrast: issuer and audience right.
            let fine = Mint.raw(header: #"{"alg":"HS256"}"#, payload: #"{"sub":"ada","exp":\#(Mint.now + 3600),"iss":"idp","aud":["web","app"]}"#)
            #expect(try await client.get("/api/notes", as: fine).status == .ok)
        }
    }

    @Test("Without a token a restricted read is 401 with a bare challenge; the client key is 403; public reads need nothing", arguments: Backend.available)
    func anonymous(backend: Backend) async throws {
        try await withUserServer(backend: backend, rules: Self.rules) { client, _ in
            try await seed(client)
            _ = try await client.write(.post, "/api/public", #"[{"id":"p"}]"#)
            let bare = try await client.get("/api/notes", as: nil)
            #expect(bare.status == .unauthorized)
            #expect(bare.header("WWW-Authenticate") == #"Bearer realm="deltasnap""#)
            #expect(try await client.get("/api/notes", as: "client-key-123").status == .forbidden)
            // One record of it is refused the same way: 403 not-readable, not 401.
            let record = try await client.get("/api/notes/a1", as: "client-key-123")
            #expect(record.status == .forbidden && record.text.contains("urn:deltasnap:problem:not-readable"), "\(record.status) \(record.text)")
            #expect(try await client.get("/api/notes/a1", as: nil).status == .unauthorized)
            #expect(try await client.get("/api/public/p", as: "client-key-123").status == .ok)
            #expect(try await client.get("/api/notes", as: "wrong-secret").status == .unauthorized)
            let owner = try await client.get("/api/notes", as: secret)
            #expect(owner.text == #"{"notes":[{"id":"a1","owner":"ada"},{"id":"b1","owner":"bob"}]}"#)
            let open = try await client.get("/api/public", as: nil)
            #expect(open.status == .ok)
            #expect(open.header("Cache-Control") == "no-store")
            #expect(open.header("Vary")?.contains("Authorization") == false)
            // A collection the rules do not name: the owner's alone.
            _ = try await client.write(.post, "/api/secrets", #"[{"id":"s"}]"#)
            #expect(try await client.get("/api/secrets", as: try await Mint.hs256("ada")).status == .forbidden)
            #expect(try await client.get("/api/secrets", as: nil).status == .unauthorized)
        }
    }

    @Test("The JWK Set file is read again when it changes: a rotated key signs users in without a restart", arguments: Backend.available)
    func rotation(backend: Backend) async throws {
        let keys = try await TestKeys.make()
        let (file, jwks) = try jwksFile(keys)
        try await withUserServer(backend: backend, rules: Self.rules, jwks: jwks) { client, _ in
            try await seed(client)
            #expect(try await client.get("/api/notes", as: try await Mint.signed("ES256", keys, "ada")).status == .ok)
            // A key taken out of the file stops verifying new tokens as soon as the file is read again.
            let esOnly = try keys.jwks().replacingOccurrences(of: #"{"kty":"OKP""#, with: #"{"kty":"OKP","use":"enc""#)
            try Data(esOnly.utf8).write(to: file)
            try await Task.sleep(for: .milliseconds(1100))
            let removed = try await client.get("/api/notes", as: try await Mint.signed("EdDSA", keys, "bob"))
            #expect(removed.text.contains("token-key-unknown"), "\(removed.text)")
            let rotated = try await TestKeys.make()
            let before = try await client.get("/api/notes", as: try await Mint.signed("ES256", rotated, "ada", suffix: "-2"))
            #expect(before.text.contains("token-key-unknown"))
            try Data(try rotated.jwks(suffix: "-2").utf8).write(to: file)
            try await Task.sleep(for: .milliseconds(1100))  // the file is looked at, at most once a second
            let after = try await client.get("/api/notes", as: try await Mint.signed("ES256", rotated, "ada", suffix: "-2"))
            #expect(after.status == .ok, "\(after.text)")
            let old = try await client.get("/api/notes", as: try await Mint.signed("EdDSA", keys, "ada"))
            #expect(old.text.contains("token-key-unknown"))  // the old key left the set
        }
    }

    @Test(
        "A key taken out of the JWK Set file ends every verification made with it within a second, kept and early ones included; a file that breaks is counted once and changes nothing",
        arguments: Backend.available)
    func removedKey(backend: Backend) async throws {
        let keys = try await TestKeys.make()
        let (file, jwks) = try jwksFile(keys)
        try await withUserServer(backend: backend, rules: Self.rules, jwks: jwks) { client, _ in
            try await seed(client)
            let ed = try await Mint.signed("EdDSA", keys, "ada")
            let es = try await Mint.signed("ES256", keys, "ada")
            let push = #"{"client":"ada-1","mutations":[{"id":1,"collection":"notes","op":"put","record":{"id":"a2"},"base":null,"create":true}]}"#
            let first = try await client.get("/api/notes", as: ed)
            #expect(first.status == .ok)
            let etag = try #require(first.header("ETag"))
            // Verified once and kept: the revalidation is answered from the kept verification.
            #expect(try await client.get("/api/notes", as: ed, [.ifNoneMatch: etag]).status == .notModified)
            #expect(try await client.write(.post, "/push", push, auth: "Bearer \(ed)").status != .unauthorized)
            // The Ed25519 key leaves the file: a second later the token is refused everywhere.
            let withoutEd = try keys.jwks().replacingOccurrences(of: #"{"kty":"OKP""#, with: #"{"kty":"OKP","use":"enc""#)
            try Data(withoutEd.utf8).write(to: file)
            try await Task.sleep(for: .milliseconds(1100))
            let revalidated = try await client.get("/api/notes", as: ed, [.ifNoneMatch: etag])
            #expect(revalidated.status == .unauthorized && revalidated.text.contains("token-key-unknown"), "\(revalidated.status) \(revalidated.text)")
            #expect(try await client.get("/api/notes", as: ed).status == .unauthorized)
            #expect(try await client.write(.post, "/push", push, auth: "Bearer \(ed)").status == .unauthorized)
            #expect(try await client.metric("deltasnap_jwks_changes_total") == 1)
            #expect(try await client.get("/api/notes", as: es).status == .ok)
            // Files that cannot be used (cut short, a key without kid, gone) change nothing: the
            // last good set stays in force, and each failure is counted once however often it is seen.
            let broken: [String?] = [String(withoutEd.prefix(40)), withoutEd.replacingOccurrences(of: #""kid":"rsa-1","#, with: ""), nil]
            for (index, text) in broken.enumerated() {
                if let text { try Data(text.utf8).write(to: file) } else { try FileManager.default.removeItem(at: file) }
                for _ in 0..<2 {
                    try await Task.sleep(for: .milliseconds(1100))
                    #expect(try await client.get("/api/notes", as: es).status == .ok, "\(index)")
                    #expect(try await client.get("/api/notes", as: ed).status == .unauthorized, "\(index)")
                }
                #expect(try await client.metric("deltasnap_jwks_failures_total") == index + 1)
                #expect(String(buffer: try await client.get("/metrics").body).contains("deltasnap_jwks_failing 1.0\n"))
            }
            // The key comes back: its tokens verify again, and the failure is over.
            try Data(try keys.jwks().utf8).write(to: file)
            try await Task.sleep(for: .milliseconds(1100))
            #expect(try await client.get("/api/notes", as: ed).status == .ok)
            #expect(try await client.metric("deltasnap_jwks_changes_total") == 2)
            #expect(String(buffer: try await client.get("/metrics").body).contains("deltasnap_jwks_failing 0.0\n"))
        }
    }
}

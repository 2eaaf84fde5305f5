import Crypto
import DeltaCore
import DeltaRules
import DeltaServer
import DeltaStore
import DeltaTestSupport
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import JWTKit
import Testing

/// The HS256 secret the user tests' servers take (32 bytes and more, as `deltasnap serve` requires).
let userSecret = "user-secret-0123456789abcdef-0123456789"

/// Keys made for the tests: P-256 (ES256), Ed25519 (EdDSA) and RSA-2048 (RS256, from `openssl genrsa`).
struct TestKeys: Sendable {
    let es256: ES256PrivateKey
    let eddsa: EdDSA.PrivateKey
    let rs256: JWTKit.Insecure.RSA.PrivateKey

    /// Fresh keys; the RSA key by a real `openssl` process.
    static func make() async throws -> TestKeys {
        let (status, printed) = try await runProgram(
            try requireProgram("openssl", package: "openssl"), ["genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048"])
        guard status == 0, let start = printed.range(of: "-----BEGIN"), let footer = printed.range(of: "-----END", range: start.upperBound..<printed.endIndex),
            let end = printed.range(of: "-----", range: footer.upperBound..<printed.endIndex)
        else { throw TestFailure("openssl genpkey failed (\(status)): \(printed.prefix(200))") }
        let pem = String(printed[start.lowerBound..<end.upperBound])
        return TestKeys(es256: ES256PrivateKey(), eddsa: try EdDSA.PrivateKey(curve: .ed25519), rs256: try JWTKit.Insecure.RSA.PrivateKey(pem: pem))
    }

    /// The public JWK of each key, kids `ec-1`, `ed-1`, `rsa-1` (with `suffix` appended).
    func jwks(suffix: String = "") throws -> String {
        let ec = try #require(es256.publicKey.parameters)
        let (modulus, exponent) = try rs256.publicKey.getKeyPrimitives()
        let ed = Base64URLText.encode(Array(eddsa.publicKey.rawRepresentation))
        return """
            {"keys":[
            {"kty":"EC","crv":"P-256","kid":"ec-1\(suffix)","use":"sig","x":"\(Base64URLText.fromStandard(ec.x))","y":"\(Base64URLText.fromStandard(ec.y))"},
            {"kty":"OKP","crv":"Ed25519","kid":"ed-1\(suffix)","x":"\(ed)"},
            {"kty":"RSA","kid":"rsa-1\(suffix)","alg":"RS256","n":"\(Base64URLText.encode(Array(modulus)))","e":"\(Base64URLText.encode(Array(exponent)))"}
            ]}
            """
    }
}

/// base64url helpers for building tokens by hand (hostile ones included).
enum Base64URLText {
    static func encode(_ bytes: [UInt8]) -> String {
        Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_").replacingOccurrences(
            of: "=", with: "")
    }
    static func fromStandard(_ text: String) -> String {
        text.replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
    }
    static func encode(_ text: String) -> String { encode(Array(text.utf8)) }
    /// The bytes of base64url `text` (padding added back), nil when it is not base64.
    static func decode(_ text: String) -> [UInt8]? {
        let standard = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        return Data(base64Encoded: standard + String(repeating: "=", count: (4 - standard.utf8.count % 4) % 4)).map(Array.init)
    }
}

/// Claims of any shape for jwt-kit to sign.
struct TestClaims: JWTPayload {
    let json: String
    init(_ json: String) { self.json = json }
    init(from decoder: any Decoder) throws { json = "{}" }
    func verify(using algorithm: some JWTAlgorithm) async throws {}
    func encode(to encoder: any Encoder) throws { try Encoded(try JSONValue(parsing: Array(json.utf8))).encode(to: encoder) }

    /// A JSON value through `Encodable`.
    struct Encoded: Encodable {
        let value: JSONValue
        init(_ value: JSONValue) { self.value = value }
        func encode(to encoder: any Encoder) throws {
            switch value {
            case .object(let members):
                var container = encoder.container(keyedBy: AnyKey.self)
                for member in members { try container.encode(Encoded(member.value), forKey: AnyKey(stringValue: member.key)) }
            case .array(let items):
                var container = encoder.unkeyedContainer()
                for item in items { try container.encode(Encoded(item)) }
            case .string(let text):
                var container = encoder.singleValueContainer()
                try container.encode(text)
            case .number(let text):
                var container = encoder.singleValueContainer()
                try container.encode(Int64(text) ?? 0)
            case .bool(let flag):
                var container = encoder.singleValueContainer()
                try container.encode(flag)
            case .null:
                var container = encoder.singleValueContainer()
                try container.encodeNil()
            }
        }
    }
    struct AnyKey: CodingKey {
        let stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }
}

/// Signs tokens the way identity providers do, with jwt-kit.
enum Mint {
    static var now: Int64 { Int64(Date().timeIntervalSince1970) }

    /// An HS256 token for `sub` with `extra` claims (a JSON object's members, without braces).
    static func hs256(_ sub: String, extra: String = "", secret: String = userSecret, ttl: Int64 = 3600) async throws -> String {
        let keys = await JWTKeyCollection().add(hmac: HMACKey(from: secret), digestAlgorithm: .sha256)
        return try await keys.sign(TestClaims(claims(sub, extra, ttl)))
    }

    /// A token signed with one of `keys`: `ES256`, `EdDSA` or `RS256`, kid as in `TestKeys.jwks`.
    static func signed(_ algorithm: String, _ keys: TestKeys, _ sub: String, extra: String = "", kid: String? = nil, suffix: String = "") async throws -> String
    {
        let collection = JWTKeyCollection()
        switch algorithm {
        case "ES256": await collection.add(ecdsa: keys.es256, kid: JWKIdentifier(string: kid ?? "ec-1\(suffix)"))
        case "EdDSA": await collection.add(eddsa: keys.eddsa, kid: JWKIdentifier(string: kid ?? "ed-1\(suffix)"))
        default: await collection.add(rsa: keys.rs256, digestAlgorithm: .sha256, kid: JWKIdentifier(string: kid ?? "rsa-1\(suffix)"))
        }
        return try await collection.sign(TestClaims(claims(sub, extra, 3600)), kid: JWKIdentifier(string: kid ?? defaultKid(algorithm, suffix)))
    }

    static func defaultKid(_ algorithm: String, _ suffix: String) -> String {
        switch algorithm {
        case "ES256": "ec-1\(suffix)"
        case "EdDSA": "ed-1\(suffix)"
        default: "rsa-1\(suffix)"
        }
    }

    static func claims(_ sub: String, _ extra: String, _ ttl: Int64) -> String {
        #"{"sub":"\#(sub)","exp":\#(now + ttl),"iat":\#(now)\#(extra.isEmpty ? "" : "," + extra)}"#
    }

    /// A token from hand-made parts: `header` and `payload` JSON, signed HS256 with `secret` over exactly those bytes.
    static func raw(header: String, payload: String, secret: String = userSecret) -> String {
        let input = Base64URLText.encode(header) + "." + Base64URLText.encode(payload)
        let mac = HMAC<Crypto.SHA256>.authenticationCode(for: Array(input.utf8), using: SymmetricKey(data: Array(secret.utf8)))
        return input + "." + Base64URLText.encode(Array(mac))
    }
}

/// Runs `body` against a real server on loopback over a fresh store of `backend`, with `rules`
/// installed and users verified by `secret` and, when given, the JWK Set file `jwks`.
func withUserServer<T: Sendable>(
    backend: Backend, rules: String, jwks: JWKSLocation? = nil, issuer: String? = nil, audience: String? = nil, grantLifetime: UInt64? = nil,
    configure: @escaping @Sendable (inout ServerConfiguration) -> Void = { _ in },
    _ body: @escaping @Sendable (any TestClientProtocol, any ChangeStore) async throws -> T
) async throws -> T {
    try await backend.withStore { store, _ in
        var configuration = ServerConfiguration()
        configuration.port = 0
        configuration.writeToken = secret
        configuration.clientKey = "client-key-123"
        configuration.idleTimeout = .seconds(600)  // as in withServer: the test's connection may idle while nginx starts
        let parsed = try Rules(parsing: Array(rules.utf8))
        configuration.rules = StoredRules(version: try await store.installRules(parsed), rules: parsed)
        configuration.authenticator = try await Authenticator(secret: userSecret, jwks: jwks, issuer: issuer, audience: audience)
        if let grantLifetime {
            configuration.cacheableReads = true
            configuration.readGrants = ReadGrants(key: try await store.grantKey(), lifetime: grantLifetime)
        }
        configure(&configuration)
        let app = buildApplication(store: store, earlyVerdicts: store, configuration: configuration)
        return try await app.testOnServerThreads(.live) { client in try await body(client, store) }
    }
}

extension TestClientProtocol {
    /// GET as a user (a bearer token), with more headers.
    func get(_ path: String, as token: String?, _ headers: HTTPFields = [:]) async throws -> TestResponse {
        var all = headers
        if let token { all[.authorization] = "Bearer \(token)" }
        return try await execute(uri: path, method: .get, headers: all)
    }
}

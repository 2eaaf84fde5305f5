import DeltaCore
import DeltaRules
import Foundation
import JWTKit
import Logging
import NIOConcurrencyHelpers

/// Verifies users' JSON Web Tokens (RFC 7519, RFC 7515) with vapor/jwt-kit: ES256, EdDSA
/// (Ed25519) and RS256 against a JWK Set (`--jwks`), HS256 against a shared secret
/// (`--jwt-secret`); `--jwt-issuer` and `--jwt-audience` when set. `exp` is required, `nbf` and
/// `iat` are honoured, each with at most `leeway` seconds of clock skew; `sub` is the user.
///
/// A verified token is kept (by its SHA-256, at most `cacheEntries`) until it expires, so a
/// revalidation costs a hash and a lookup, not a signature check. One verified with a key of the
/// JWK Set is kept with that set's generation, and holds only while that set is in force and its
/// source has been looked at within `KeySet.fileInterval` (a file): a key taken out of the set
/// ends every verification made with it, kept ones included, within a second of the change.
public final class Authenticator: Sendable {
    /// The clock skew allowed on `exp`, `nbf` and `iat`, in seconds.
    public static let leeway: Double = 60
    /// The longest token accepted, in bytes.
    public static let maximumBytes = 8 << 10
    /// The most verified tokens kept.
    public static let cacheEntries = 10_000

    private let hmac: JWTKeyCollection?
    private let keySet: KeySet?
    /// `--jwt-issuer`: the `iss` every token must carry, when set.
    let issuerRequired: String?
    /// `--jwt-audience`: the audience every token's `aud` must name, when set.
    let audienceRequired: String?
    private let verified = NIOLockedValueBox([[UInt8]: Verified]())

    /// A verified token as kept: its claims, when it expires, and the generation of the JWK Set
    /// whose key verified it (nil for the HS256 secret, which does not change while the server runs).
    private struct Verified: Sendable {
        let claims: Claims
        let expires: Double
        let generation: UInt64?
    }

    /// Creates a verifier; reads (or fetches) the JWK Set now, and throws when it is unusable.
    /// At least one of `secret` and `jwks` must be given.
    public convenience init(secret: String?, jwks: JWKSLocation?, issuer: String? = nil, audience: String? = nil) async throws {
        try await self.init(secret: secret, jwks: jwks, issuer: issuer, audience: audience, refetchAfter: KeySet.refetchInterval)
    }

    /// The same, with another least time between two fetches of a JWK Set URL (`serve
    /// --jwks-refresh`): a key removed there stops working within it.
    public init(secret: String?, jwks: JWKSLocation?, issuer: String?, audience: String?, refetchAfter: TimeInterval) async throws {
        precondition(secret != nil || jwks != nil, "Authenticator: give a secret, a JWK Set, or both")
        if let secret {
            hmac = await JWTKeyCollection().add(hmac: HMACKey(from: secret), digestAlgorithm: .sha256)
        } else {
            hmac = nil
        }
        if let jwks { keySet = try await KeySet(jwks, refetchAfter: refetchAfter) } else { keySet = nil }
        self.issuerRequired = issuer
        self.audienceRequired = audience
    }

    /// The claims of `token`, verified; throws a `TokenRefusal` naming the check that failed.
    func claims(of token: String, now: Double = Date().timeIntervalSince1970) async throws -> Claims {
        let bytes = Array(token.utf8)
        let key = SHA256.hash(bytes)
        if let kept = verified.withLockedValue({ $0[key] }) {
            guard now <= kept.expires + Self.leeway else {
                _ = verified.withLockedValue { $0.removeValue(forKey: key) }
                throw TokenRefusal(.expired, "token: expired at \(Int(kept.expires)) (now \(Int(now)))")
            }
            if let generation = kept.generation, let keySet, !keySet.isCurrent(generation) { await keySet.refreshIfDue() }
            if holds(kept.generation) { return kept.claims }
            // The key set changed since: verified again, against the set in force.
            _ = verified.withLockedValue { $0.removeValue(forKey: key) }
        }
        let (claims, expires, generation) = try await verify(bytes, now: now)
        verified.withLockedValue { cache in
            if cache.count >= Self.cacheEntries {
                cache = cache.filter { now <= $0.value.expires + Self.leeway }
                while cache.count >= Self.cacheEntries, let any = cache.keys.first { cache.removeValue(forKey: any) }
            }
            cache[key] = Verified(claims: claims, expires: expires, generation: generation)
        }
        return claims
    }

    /// The claims of `token`, when it expires, and the generation of the key set that verified it,
    /// when it was verified before, has not expired and still holds (`holds`); nil otherwise (the
    /// caller then takes the path that verifies). No signature check: for the early `304`s.
    func cachedClaims(of token: String, now: Double = Date().timeIntervalSince1970) -> (claims: Claims, expires: Double, generation: UInt64?)? {
        let key = SHA256.hash(Array(token.utf8))
        guard let kept = verified.withLockedValue({ $0[key] }), now <= kept.expires + Self.leeway, holds(kept.generation) else { return nil }
        return (kept.claims, kept.expires, kept.generation)
    }

    /// Whether a verification made with the key set of `generation` holds now, without waiting:
    /// always for the HS256 secret (nil); otherwise while that set is in force and its source is
    /// not due for a look. False sends the request the way that looks (`claims(of:)`).
    func holds(_ generation: UInt64?) -> Bool {
        guard let generation else { return true }
        return keySet?.isCurrent(generation) ?? false
    }

    /// Sends what the JWK Set's source does (reads that fail, sets that replace the one in force)
    /// to the server's log and metrics.
    func report(to metrics: ServerMetrics, logger: Logger) {
        keySet?.reporting.withLockedValue { $0 = KeySet.Reporting(logger: logger, metrics: metrics) }
    }

    /// Checks the header, the signature and the claims, in that order; returns the claims, when
    /// they expire, and the generation of the key set whose key verified them (nil: the secret's).
    private func verify(_ bytes: [UInt8], now: Double) async throws -> (Claims, Double, UInt64?) {
        guard bytes.count <= Self.maximumBytes else { throw TokenRefusal(.malformed, "token: longer than \(Self.maximumBytes) bytes (\(bytes.count))") }
        let parts = bytes.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        guard parts.count == 3, let headerBytes = Base64URL.decode(parts[0]), let payloadBytes = Base64URL.decode(parts[1]),
            let signature = Base64URL.decode(parts[2]), case .object? = try? JSONValue(parsing: headerBytes), let header = try? JSONValue(parsing: headerBytes)
        else { throw TokenRefusal(.malformed, "token: not three base64url parts with a JSON object header (JWS compact form)") }
        guard case .string(let algorithm)? = header["alg"] else { throw TokenRefusal(.algorithm, "token: the header names no \"alg\"") }
        if header["crit"] != nil { throw TokenRefusal(.malformed, "token: critical header extensions (\"crit\") are not understood here") }
        var kid: String?
        if let named = header["kid"] {
            guard case .string(let text) = named else { throw TokenRefusal(.malformed, "token: \"kid\" must be a string") }
            kid = text
        }
        let (keys, generation) = try await keys(for: algorithm, kid: kid)
        // ES256 and EdDSA signatures are 64 bytes (RFC 7518 §3.4: R and S, not DER; RFC 8037 §3.1):
        // one of another length, truncated or DER-encoded, is a signature that does not verify.
        if ["ES256", "EdDSA"].contains(algorithm), signature.count != 64 {
            throw TokenRefusal(.signature, "token: the signature does not verify (\(algorithm) signatures are 64 bytes; this one is \(signature.count))")
        }
        do {
            _ = try await keys.verify(bytes, as: SignatureOnly.self)
        } catch let error as JWTError where error.errorType == .signatureVerificationFailed {
            throw TokenRefusal(.signature, "token: the signature does not verify (\(algorithm)\(kid.map { ", kid \(String(reflecting: $0))" } ?? ""))")
        } catch {
            throw TokenRefusal(.malformed, "token: cannot be verified (\(String(describing: error).prefix(120)))")
        }
        let (claims, expires) = try checkedClaims(payloadBytes, now: now)
        return (claims, expires, generation)
    }

    /// The key collection that verifies `algorithm` and `kid`, with the generation of the key set
    /// the answer depends on (nil: it depends on none); refuses algorithms that do not fit.
    private func keys(for algorithm: String, kid: String?) async throws -> (JWTKeyCollection, UInt64?) {
        switch algorithm {
        case "HS256":
            guard let hmac else { throw TokenRefusal(.algorithm, "token: this server takes no HS256 tokens (no --jwt-secret)") }
            guard let kid, let keySet else { return (hmac, nil) }
            // Whether the kid names a public key depends on the set: kept with its generation.
            let (key, generation) = await keySet.key(kid)
            if key != nil {
                throw TokenRefusal(.algorithm, "token: HS256 names the public key \(String(reflecting: kid)); HS256 is checked against the shared secret only")
            }
            return (hmac, generation)
        case "ES256", "EdDSA", "RS256":
            guard let keySet else { throw TokenRefusal(.algorithm, "token: this server takes no \(algorithm) tokens (no --jwks)") }
            let (found, generation) = await keySet.key(kid)
            guard let key = found else {
                throw TokenRefusal(
                    .keyUnknown, "token: no key of the JWK Set has kid \(kid.map { String(reflecting: $0) } ?? "(none, and the set has several)")")
            }
            let fits =
                switch algorithm {
                case "ES256": key.type == "EC" && key.curve == "P-256"
                case "EdDSA": key.type == "OKP" && key.curve == "Ed25519"
                default: key.type == "RSA"
                }
            guard fits else {
                throw TokenRefusal(.algorithm, "token: \(algorithm) does not fit key \(String(reflecting: key.kid)) (\(key.type) \(key.curve ?? ""))")
            }
            return (key.keys, generation)
        default:
            throw TokenRefusal(.algorithm, "token: algorithm \(String(reflecting: String(algorithm.prefix(20)))) is not taken (ES256, EdDSA, RS256, HS256)")
        }
    }
}

/// A payload type that decodes nothing: jwt-kit checks the signature, `checkedClaims` the claims.
private struct SignatureOnly: JWTPayload {
    init(from decoder: any Decoder) throws {}
    func encode(to encoder: any Encoder) throws {}
    func verify(using algorithm: some JWTAlgorithm) async throws {}
}

import Foundation
import HTTPTypes

/// Why a bearer token was refused: each a `401` with `WWW-Authenticate: Bearer
/// error="invalid_token"` (RFC 6750) and a problem whose type names the check that failed
/// (docs/PROTOCOL.md, "Users and rules").
struct TokenRefusal: Error, Sendable, Equatable {
    /// The check that failed.
    enum Check: String, Sendable, CaseIterable {
        /// Not three base64url parts, a header or claims that are not JSON objects, a claim of the
        /// wrong type (`exp`, `nbf`, `iat` numbers; `sub`, `iss` strings; `aud` string or strings),
        /// a missing `exp` or `sub`, a `crit` header, or longer than `maximumBytes`.
        case malformed = "token-malformed"
        /// `alg: none`, an algorithm this server does not take, or one that does not fit the key
        /// named (algorithm confusion: an HS256 token naming an RSA key, say).
        case algorithm = "token-algorithm"
        /// The signature does not verify.
        case signature = "token-signature"
        /// `exp` is past, beyond the clock leeway.
        case expired = "token-expired"
        /// `nbf` or `iat` is in the future, beyond the clock leeway.
        case notYetValid = "token-not-yet-valid"
        /// `iss` is not `--jwt-issuer`.
        case issuer = "token-issuer"
        /// `aud` does not name `--jwt-audience`.
        case audience = "token-audience"
        /// `kid` names no key of the JWK Set (after fetching it again, for a URL).
        case keyUnknown = "token-key-unknown"
    }

    /// The check that failed.
    let check: Check
    /// What exactly, for people: `what: why (evidence)`, never a secret.
    let detail: String

    init(_ check: Check, _ detail: String) {
        self.check = check
        self.detail = detail
    }

    /// The `401` problem.
    var problem: Problem {
        let description = detail.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "'")
        return Problem(
            .unauthorized, check.rawValue, detail,
            headers: [.wwwAuthenticate: "Bearer realm=\"deltasnap\", error=\"invalid_token\", error_description=\"\(description)\""])
    }

    /// The `401` for a request that needs a user and carries no token (RFC 6750 §3.1: no error code).
    static func missing(_ what: String) -> Problem {
        Problem(
            .unauthorized, "unauthorized", "\(what): sign in: send Authorization: Bearer <JSON Web Token>",
            headers: [.wwwAuthenticate: "Bearer realm=\"deltasnap\""])
    }
}

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

    /// The `401` problem; its challenge's `error_description` is `detail` in the characters RFC 6750
    /// §3 allows there (printable ASCII but `"` and `\`): the body's `detail` keeps the rest.
    var problem: Problem {
        Problem(
            .unauthorized, check.rawValue, detail,
            headers: [.wwwAuthenticate: "Bearer realm=\"deltasnap\", error=\"invalid_token\", error_description=\"\(Self.errorDescription(detail))\""])
    }

    /// `text` as an `error_description` (RFC 6750 §3: `%x20-21 / %x23-5B / %x5D-7E`): `"` becomes
    /// `'`, and every other character outside that set (a `\`, a control character, anything not
    /// ASCII, such as a `kid` a token made up) becomes `?`.
    static func errorDescription(_ text: String) -> String {
        var out = String.UnicodeScalarView()
        for scalar in text.unicodeScalars {
            switch scalar.value {
            case 0x22: out.append("'")
            case 0x20...0x21, 0x23...0x5B, 0x5D...0x7E: out.append(scalar)
            default: out.append("?")
            }
        }
        return String(out)
    }

    /// The `401` for a request that needs a user and carries no token (RFC 6750 §3.1: no error code).
    static func missing(_ what: String) -> Problem {
        Problem(
            .unauthorized, "unauthorized", "\(what): sign in: send Authorization: Bearer <JSON Web Token>",
            headers: [.wwwAuthenticate: "Bearer realm=\"deltasnap\""])
    }
}

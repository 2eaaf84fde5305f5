import DeltaCore
import DeltaRules

extension Authenticator {
    /// The claims of a verified token's payload, after the time, issuer and audience checks.
    func checkedClaims(_ payload: [UInt8], now: Double) throws -> (Claims, Double) {
        guard let value = try? JSONValue(parsing: payload), case .object = value else {
            throw TokenRefusal(.malformed, "token: the claims are not a JSON object")
        }
        func time(_ name: String) throws -> Double? {
            guard let claim = value[name] else { return nil }
            guard case .number(let text) = claim, let seconds = Double(text), seconds.isFinite else {
                throw TokenRefusal(.malformed, "token: \"\(name)\" must be a number of seconds since 1970")
            }
            return seconds
        }
        guard let expires = try time("exp") else { throw TokenRefusal(.malformed, "token: \"exp\" is required") }
        let notBefore = try time("nbf")
        let issuedAt = try time("iat")
        let claims: Claims
        do { claims = try Claims(value) } catch let error as WireError { throw TokenRefusal(.malformed, "token: \(error.reason)") }
        if let found = value["iss"], case .string = found {} else if value["iss"] != nil { throw TokenRefusal(.malformed, "token: \"iss\" must be a string") }
        var audiences: [String] = []
        switch value["aud"] {
        case nil: break
        case .string(let one)?: audiences = [one]
        case .array(let items)?:
            for item in items {
                guard case .string(let one) = item else { throw TokenRefusal(.malformed, "token: \"aud\" must be a string or an array of strings") }
                audiences.append(one)
            }
        default: throw TokenRefusal(.malformed, "token: \"aud\" must be a string or an array of strings")
        }
        if now > expires + Self.leeway { throw TokenRefusal(.expired, "token: expired at \(Int(expires)) (now \(Int(now)))") }
        if let notBefore, notBefore > now + Self.leeway { throw TokenRefusal(.notYetValid, "token: not valid before \(Int(notBefore)) (now \(Int(now)))") }
        if let issuedAt, issuedAt > now + Self.leeway { throw TokenRefusal(.notYetValid, "token: issued in the future, at \(Int(issuedAt)) (now \(Int(now)))") }
        if let issuer = issuerRequired {
            guard case .string(let found)? = value["iss"], found == issuer else {
                throw TokenRefusal(.issuer, "token: \"iss\" is not \(String(reflecting: issuer))")
            }
        }
        if let audience = audienceRequired, !audiences.contains(audience) {
            throw TokenRefusal(.audience, "token: \"aud\" does not name \(String(reflecting: audience))")
        }
        return (claims, expires)
    }
}

/// base64url without padding (RFC 7515 §2), strict: other characters, a length no encoding has,
/// or unused bits at the end that are not zero (RFC 4648 §3.5) are refused, so that each byte
/// string has one spelling: a grant's URL (`ReadGrant`) or a token cannot be varied and stay valid.
enum Base64URL {
    /// The bytes `text` encodes; nil when it is not canonical base64url.
    static func decode(_ text: some Collection<UInt8>) -> [UInt8]? {
        guard text.count % 4 != 1 else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(text.count * 3 / 4)
        var buffer: UInt32 = 0
        var bits = 0
        for byte in text {
            let value: UInt8
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"): value = byte - UInt8(ascii: "A")
            case UInt8(ascii: "a")...UInt8(ascii: "z"): value = byte - UInt8(ascii: "a") + 26
            case UInt8(ascii: "0")...UInt8(ascii: "9"): value = byte - UInt8(ascii: "0") + 52
            case UInt8(ascii: "-"): value = 62
            case UInt8(ascii: "_"): value = 63
            default: return nil
            }
            buffer = buffer << 6 | UInt32(value)
            bits += 6
            if bits >= 8 {
                bits -= 8
                out.append(UInt8(truncatingIfNeeded: buffer >> UInt32(bits)))
            }
        }
        // The last character's bits past the last byte: zero in the one encoding of these bytes.
        guard buffer & ((1 << UInt32(bits)) - 1) == 0 else { return nil }
        return out
    }
}

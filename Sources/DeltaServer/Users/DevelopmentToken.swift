public import DeltaCore
import JWTKit

/// HS256 tokens for development and for the README's walk-through (`deltasnap token`), signed
/// by vapor/jwt-kit with the server's `--jwt-secret`. Production apps get their tokens from an
/// identity provider (verified with `--jwks`) or from a backend that holds the secret.
public enum DevelopmentToken {
    /// A compact JWS of `claims` (a JSON object, which should carry `sub` and `exp`), HS256 with `secret`.
    public static func sign(_ claims: JSONValue, secret: String) async throws -> String {
        let keys = await JWTKeyCollection().add(hmac: HMACKey(from: secret), digestAlgorithm: .sha256)
        return try await keys.sign(AnyClaims(value: claims), header: ["typ": "JWT"])
    }
}

/// Claims of any shape, encoded as the JSON they are.
private struct AnyClaims: JWTPayload {
    let value: JSONValue

    init(value: JSONValue) { self.value = value }
    init(from decoder: any Decoder) throws { value = .null }
    func verify(using algorithm: some JWTAlgorithm) async throws {}

    func encode(to encoder: any Encoder) throws { try JSONValueCoding(value).encode(to: encoder) }
}

/// Encodes a `JSONValue` through `Encodable`, numbers exactly as written where they fit.
private struct JSONValueCoding: Encodable {
    let value: JSONValue
    init(_ value: JSONValue) { self.value = value }

    struct Key: CodingKey {
        let stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    func encode(to encoder: any Encoder) throws {
        switch value {
        case .object(let members):
            var container = encoder.container(keyedBy: Key.self)
            for member in members { try container.encode(JSONValueCoding(member.value), forKey: Key(stringValue: member.key)) }
        case .array(let items):
            var container = encoder.unkeyedContainer()
            for item in items { try container.encode(JSONValueCoding(item)) }
        case .null:
            var container = encoder.singleValueContainer()
            try container.encodeNil()
        case .bool(let flag):
            var container = encoder.singleValueContainer()
            try container.encode(flag)
        case .string(let text):
            var container = encoder.singleValueContainer()
            try container.encode(text)
        case .number(let text):
            var container = encoder.singleValueContainer()
            if let integer = Int64(text) { try container.encode(integer) } else { try container.encode(Double(text) ?? 0) }
        }
    }
}

import DeltaCore

/// Who a request acts for: the claims of a verified JSON Web Token (RFC 7519), or the ones a
/// command line gives (`deltasnap bake --as-claims`, `rules explain --claims`).
///
/// Rules read claims by name (`{"$claim": "sub"}`); `sub` is the user. Values are kept as the
/// token carried them, as JSON.
public struct Claims: Sendable, Equatable {
    /// The user: the `sub` claim.
    public let subject: String
    /// Every claim, `sub` included, by name.
    public let values: [String: JSONValue]

    /// Claims from a JSON object, which must hold a non-empty string `sub`.
    public init(_ object: JSONValue) throws {
        guard case .object(let members) = object else {
            throw WireError(.claims, "claims are a JSON object", evidence: String(decoding: object.canonicalBytes.prefix(60), as: UTF8.self))
        }
        var values: [String: JSONValue] = [:]
        for member in members { values[member.key] = member.value }
        guard case .string(let subject)? = values["sub"], !subject.isEmpty else {
            throw WireError(
                .claims, "\"sub\" must be a non-empty string: it names the user",
                evidence: values["sub"].map { String(decoding: $0.canonicalBytes.prefix(60), as: UTF8.self) } ?? "missing")
        }
        if let name = Self.nameHoldingNUL(object) {
            throw WireError(.claims, "claims must not contain NUL (U+0000): rules compare them, and stores keep them, as text", evidence: name)
        }
        self.subject = subject
        self.values = values
    }

    /// The first claim (by name) with a NUL in a string or a member name anywhere inside it.
    private static func nameHoldingNUL(_ object: JSONValue) -> String? {
        func holds(_ value: JSONValue) -> Bool {
            switch value {
            case .string(let text): return text.utf8.contains(0)
            case .array(let items): return items.contains(where: holds)
            case .object(let members): return members.contains { $0.key.utf8.contains(0) || holds($0.value) }
            case .null, .bool, .number: return false
            }
        }
        guard case .object(let members) = object else { return nil }
        return members.first { $0.key.utf8.contains(0) || holds($0.value) }.map { String(reflecting: $0.key) }
    }

    /// Claims from JSON text, e.g. `{"sub": "ada", "teams": ["red"]}`.
    public init(parsing text: String) throws {
        try self.init(JSONValue(parsing: Array(text.utf8)))
    }

    /// The claim `name`, nil when the token does not carry it.
    public subscript(name: String) -> JSONValue? { values[name] }

    /// 16 hex digits of SHA-256 over `sub` and the values of `names` (the claims some rules read):
    /// what a user's sync token is bound to. Equal for two tokens of the same user whose claims
    /// give the rules the same values; different when the user, or one of those values, differs.
    public func binding(reading names: [String]) -> String {
        var text = Array(subject.utf8)
        for name in names.sorted(by: { $0.utf8.lexicographicallyPrecedes($1.utf8) }) {
            text.append(0x0A)
            JSONValue.writeString(name, into: &text)
            text.append(UInt8(ascii: "="))
            text.append(contentsOf: values[name]?.canonicalBytes ?? Array("-".utf8))
        }
        return SHA256.shortHex(text)
    }
}

/// A sync token: names one committed position of one database, exactly.
///
/// On the wire it travels as two opaque strings that clients echo verbatim:
/// - `entityTag` (the `ETag`, echoed in `If-None-Match`): `W/"1.<database>.<position>.<commit>"`,
///   with the database identity and the commit's random tag, so a token from another database,
///   or from a history that was rolled back and rewritten, is recognised as foreign.
/// - `lastModified` (echoed in `If-Modified-Since`): the IMF-fixdate `position` seconds after
///   1970-01-01, so HTTP stacks see a valid date that is never in the future, and the position
///   survives the round trip exactly.
public struct Token: Hashable, Sendable, CustomStringConvertible {
    /// The database's random 64-bit identity, fixed when the database is created.
    public let database: UInt64
    /// The commit position: 0 before the first commit, then 1, 2, 3, … one per write transaction.
    public let position: UInt64
    /// The random 32-bit tag of the commit at `position` (0 at position 0).
    public let commit: UInt32
    /// For a token issued to a selection: which selection, and where its limit cut off.
    public let selection: SelectionMark?

    /// The highest position a token can name (the last second IMF-fixdate can show).
    public static let maximumPosition = HTTPDate.maximumSeconds

    /// Creates a token.
    public init(database: UInt64, position: UInt64, commit: UInt32, selection: SelectionMark? = nil) {
        precondition(position <= Self.maximumPosition, "Token: position \(position) is past the largest HTTP date")
        self.database = database
        self.position = position
        self.commit = commit
        self.selection = selection
    }

    /// This token bound to a selection (or, with nil, to the whole collection).
    public func marked(_ selection: SelectionMark?) -> Token {
        Token(database: database, position: position, commit: commit, selection: selection)
    }

    /// The `ETag` value, a weak entity tag: `W/"1.<16 hex>.<decimal>.<8 hex>"`, and for a selection
    /// `W/"1.<16 hex>.<decimal>.<8 hex>.<16 hex fingerprint>.<hex of the boundary id, or empty>.<64 hex digest>"`,
    /// and for a user's read `…<64 hex digest>.<16 hex user binding>.<decimal rules version>"`.
    public var entityTag: String {
        var text = "W/\"1.\(Token.hex(database, width: 16)).\(position).\(Token.hex(UInt64(commit), width: 8))"
        if let selection {
            text += ".\(selection.fingerprint)."
            if let boundary = selection.boundary {
                for byte in boundary.utf8 { text += Token.hex(UInt64(byte), width: 2) }
            }
            text += ".\(selection.digest.hex)"
            if let user = selection.user { text += ".\(user.binding).\(user.rulesVersion)" }
        }
        return text + "\""
    }

    /// The `Last-Modified` value: an IMF-fixdate `position` seconds after 1970.
    public var lastModified: String { HTTPDate.format(position) }

    /// The entity tag, for logs and errors.
    public var description: String { entityTag }

    /// Parses an `ETag`/`If-None-Match` value; the exact inverse of `entityTag`.
    public init(entityTag text: String) throws {
        let fields = Token.fields(of: text)
        guard let fields, fields.count == 4 || fields.count == 7 || fields.count == 9, fields[0] == "1",
            fields[1].utf8.count == 16, let database = Token.parseHex(fields[1]),
            let position = Token.parseDecimal(fields[2]), position <= Token.maximumPosition,
            fields[3].utf8.count == 8, let commit = Token.parseHex(fields[3])
        else {
            throw WireError(.token, "not an entity tag this server issued", evidence: String(reflecting: String(text.prefix(100))))
        }
        var selection: SelectionMark?
        if fields.count >= 7 {
            guard fields[4].utf8.count == 16, Token.parseHex(fields[4]) != nil, let boundary = Token.parseHexBytes(fields[5]),
                let digest = StateDigest(hex: fields[6])
            else {
                throw WireError(.token, "not an entity tag this server issued", evidence: String(reflecting: String(text.prefix(100))))
            }
            var user: UserMark?
            if fields.count == 9 {
                guard fields[7].utf8.count == 16, Token.parseHex(fields[7]) != nil, let version = Token.parseDecimal(fields[8]) else {
                    throw WireError(.token, "not an entity tag this server issued", evidence: String(reflecting: String(text.prefix(100))))
                }
                user = UserMark(binding: String(fields[7]), rulesVersion: version)
            }
            selection = SelectionMark(fingerprint: String(fields[4]), boundary: boundary, digest: digest, user: user)
        }
        self.init(database: database, position: position, commit: UInt32(commit), selection: selection)
    }

    /// The id a hex field spells (empty: none); nil when it is not lowercase hex of valid UTF-8.
    private static func parseHexBytes(_ text: Substring) -> String?? {
        if text.isEmpty { return .some(nil) }
        let digits = Array(text.utf8)
        guard digits.count % 2 == 0, digits.count <= 2 * Record.maximumIDLength else { return nil }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(digits.count / 2)
        var index = 0
        while index < digits.count {
            guard let high = nibble(digits[index]), let low = nibble(digits[index + 1]) else { return nil }
            bytes.append(high << 4 | low)
            index += 2
        }
        guard let id = String(validUTF8: bytes) else { return nil }
        return .some(id)
    }

    /// The position named by a `Last-Modified`/`If-Modified-Since` value; the exact inverse of `lastModified`.
    public static func position(lastModified text: String) throws -> UInt64 {
        guard let seconds = HTTPDate.parse(text) else {
            throw WireError(.token, "not an IMF-fixdate this server issued", evidence: String(reflecting: String(text.prefix(100))))
        }
        return seconds
    }

    /// The dot-separated fields inside `W/"…"`, split on the UTF-8 bytes (a `Character` walk
    /// showed in the profile of every conditional read).
    private static func fields(of text: String) -> [Substring]? {
        let bytes = text.utf8
        guard bytes.count >= 5, bytes.starts(with: "W/\"".utf8), bytes.last == UInt8(ascii: "\"") else { return nil }
        var fields: [Substring] = []
        fields.reserveCapacity(9)
        var start = bytes.index(bytes.startIndex, offsetBy: 3)
        let end = bytes.index(before: bytes.endIndex)
        var index = start
        while index < end {
            if bytes[index] == UInt8(ascii: ".") {
                fields.append(text[start..<index])
                start = bytes.index(after: index)
            }
            index = bytes.index(after: index)
        }
        fields.append(text[start..<end])
        return fields
    }

    private static func hex(_ value: UInt64, width: Int) -> String {
        let digits = String(value, radix: 16)
        return String(repeating: "0", count: width - digits.count) + digits
    }

    /// The value of one lowercase hex digit.
    private static func nibble(_ digit: UInt8) -> UInt8? {
        switch digit {
        case 0x30...0x39: return digit - 0x30
        case 0x61...0x66: return digit - 0x61 + 10
        default: return nil
        }
    }

    /// Lowercase hex only, so that parse and print are exact inverses (at most 16 digits).
    private static func parseHex(_ text: Substring) -> UInt64? {
        guard !text.utf8.isEmpty, text.utf8.count <= 16 else { return nil }
        var value: UInt64 = 0
        for digit in text.utf8 {
            guard let nibble = nibble(digit) else { return nil }
            value = value << 4 | UInt64(nibble)
        }
        return value
    }

    /// Decimal without sign or leading zeros ("0" alone is allowed).
    private static func parseDecimal(_ text: Substring) -> UInt64? {
        guard let first = text.utf8.first else { return nil }
        if first == UInt8(ascii: "0") && text.utf8.count > 1 { return nil }
        var value: UInt64 = 0
        for digit in text.utf8 {
            guard (0x30...0x39).contains(digit) else { return nil }
            let (times, overflowTimes) = value.multipliedReportingOverflow(by: 10)
            let (sum, overflowSum) = times.addingReportingOverflow(UInt64(digit - 0x30))
            guard !overflowTimes, !overflowSum else { return nil }
            value = sum
        }
        return value
    }
}

/// What a selection's token carries besides its position: which selection it was issued to, and
/// the id of the last record inside the selection's limit (nil when fewer records matched than the
/// limit, or there is no limit). The server needs both to compute the next exact delta.
public struct SelectionMark: Hashable, Sendable {
    /// `Selection.fingerprint` of the selection the token was issued to.
    public let fingerprint: String
    /// The id of the `limit`th matching record at the token's position, when the limit was reached.
    public let boundary: String?
    /// The selection's state digest at the token's position: what a delta from this token adds to.
    public let digest: StateDigest
    /// For a read under a rule: the user and the rules it was computed for.
    public let user: UserMark?

    /// Creates a mark.
    public init(fingerprint: String, boundary: String?, digest: StateDigest, user: UserMark? = nil) {
        self.fingerprint = fingerprint
        self.boundary = boundary
        self.digest = digest
        self.user = user
    }
}

/// What a token issued to a user's read is bound to (docs/PROTOCOL.md, "Users and rules"): the
/// user and the claims the read rule uses (`Claims.binding`), and the version of the rules the
/// server held. Another user's token, or one from other rules, is refused (`user-changed`,
/// `rules-changed`), never answered with a delta computed for someone else.
public struct UserMark: Hashable, Sendable {
    /// `Claims.binding(reading:)` of the user the token was issued to.
    public let binding: String
    /// The version of the rules the server held (1, 2, …: each rules file it started with that differed).
    public let rulesVersion: UInt64

    /// Creates a mark.
    public init(binding: String, rulesVersion: UInt64) {
        self.binding = binding
        self.rulesVersion = rulesVersion
    }
}

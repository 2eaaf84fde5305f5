import Crypto
import DeltaCore
import Foundation

/// A read grant (docs/PROTOCOL.md, "Users' cacheable reads"): the rows a user's read rule gives,
/// resolved (claims and `$rows` replaced by their values), put into a cacheable read's URL with
/// the server's signature and an expiry. Every user whose rule resolves to the same rows is sent
/// the same URL, so an HTTP cache serves them all one answer, and nobody else can make one.
///
/// Its URL form, the value of `grant`: `<rules version>.<expires>.<rows>.<signature>`, where
/// `rows` is the resolved filter's canonical JSON in base64url and `signature` the base64url
/// HMAC-SHA256, under the database's grant key, of the whole cacheable read it sits in.
struct ReadGrant: Sendable, Equatable {
    /// The version of the rules the rows were resolved under.
    let rulesVersion: UInt64
    /// When the grant stops being honoured, in seconds since 1970.
    let expires: UInt64
    /// The rows: the read rule's filter, resolved for the user, as canonical JSON.
    let rows: [UInt8]

    /// The longest `grant` value a server sends; a rule that resolves to more (a user in very
    /// many teams) is answered directly, without a grant.
    static let maximumBytes = 3_072

    /// A grant of `rows` (a resolved rule) under `rulesVersion`, good until `expires`.
    init(rows: Filter, rulesVersion: UInt64, expires: UInt64) {
        self.rows = rows.json.canonicalBytes
        self.rulesVersion = rulesVersion
        self.expires = expires
    }

    /// Parses a `grant` value; nil unless it has the form above. The signature is not checked here.
    static func parse(_ text: some StringProtocol) -> (grant: ReadGrant, signature: [UInt8])? {
        let fields = text.split(separator: ".", omittingEmptySubsequences: false)
        guard text.utf8.count <= maximumBytes, fields.count == 4,
            let version = UInt64(fields[0]), String(version) == fields[0],
            let expires = UInt64(fields[1]), String(expires) == fields[1],
            let rows = Base64URL.decode(fields[2].utf8), let signature = Base64URL.decode(fields[3].utf8), signature.count == 32
        else { return nil }
        return (ReadGrant(rulesVersion: version, expires: expires, rows: rows), signature)
    }

    private init(rulesVersion: UInt64, expires: UInt64, rows: [UInt8]) {
        (self.rulesVersion, self.expires, self.rows) = (rulesVersion, expires, rows)
    }

    /// The grant without its signature: what the signature covers, within the read's query.
    var unsigned: String { "\(rulesVersion).\(expires).\(Base64URL.encode(rows))" }

    /// The rows as a filter; nil when they do not parse (a grant this server did not sign).
    var filter: Filter? { try? Filter(parsing: rows) }
}

/// Signs and checks read grants with the database's grant key (`StoreAdministration.grantKey`), shared
/// by every instance on one database, so that any of them honours a grant another one made.
public struct ReadGrants: Sendable {
    private let key: SymmetricKey
    /// How long a grant is honoured at least, in seconds; at most twice this.
    public let lifetime: UInt64

    /// Grants signed with `key` (the database's grant key), honoured for `lifetime` seconds at
    /// least: expiries are rounded up to whole lifetimes, so every user of one rule who reads in
    /// the same span is sent the same URL.
    public init(key: [UInt8], lifetime: UInt64) {
        self.key = SymmetricKey(data: key)
        self.lifetime = max(1, lifetime)
    }

    /// The expiry of a grant made at `now` (seconds since 1970): the end of the next whole lifetime.
    func expiry(now: UInt64) -> UInt64 { (now / lifetime + 2) * lifetime }

    /// The signature of `read` of `collection`, whose `grant` is the unsigned grant.
    func signature(_ read: CacheableRead, collection: CollectionName) -> [UInt8] {
        Array(HMAC<Crypto.SHA256>.authenticationCode(for: Self.message(read, collection), using: key))
    }

    /// Whether `signature` is `read`'s (its `grant` unsigned), compared in constant time.
    func isValid(_ signature: [UInt8], of read: CacheableRead, collection: CollectionName) -> Bool {
        HMAC<Crypto.SHA256>.isValidAuthenticationCode(signature, authenticating: Self.message(read, collection), using: key)
    }

    /// What a grant's signature covers: a fixed label, the collection and the read's whole query.
    private static func message(_ read: CacheableRead, _ collection: CollectionName) -> [UInt8] {
        Array("deltasnap read grant 1\n\(collection.rawValue)?\(read.query)".utf8)
    }
}

extension Base64URL {
    /// `bytes` in base64url without padding (RFC 7515 §2).
    static func encode(_ bytes: [UInt8]) -> String {
        var text = Data(bytes).base64EncodedString()
        while text.hasSuffix("=") { text.removeLast() }
        return String(text.map { $0 == "+" ? "-" : $0 == "/" ? "_" : $0 })
    }
}

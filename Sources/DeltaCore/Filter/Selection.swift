/// What a replica holds of one collection: the visible records that match `filter`, and of those
/// only the first `limit` in `id` order (docs/PROTOCOL.md, "Selections").
///
/// On the wire: `GET /api/{collection}?filter=<JSON>&limit=<N>`. A token issued for a selection
/// carries its `fingerprint`, so it cannot be used with another one.
public struct Selection: Sendable, Equatable {
    /// Equal filter and limit.
    public static func == (lhs: Selection, rhs: Selection) -> Bool { lhs.filter == rhs.filter && lhs.limit == rhs.limit }

    /// The largest `limit` accepted.
    public static let maximumLimit = 100_000_000

    /// The filter; nil selects every visible record.
    public let filter: Filter?
    /// The filter, prepared for testing stored bodies.
    public let matcher: FilterMatcher?
    /// At most this many records (the first in `id` order); nil for no limit.
    public let limit: Int?

    /// The whole collection: no filter, no limit.
    public static let everything = Selection(uncheckedFilter: nil, limit: nil)

    /// Creates a selection; `limit` must be between 1 and `maximumLimit`.
    public init(filter: Filter?, limit: Int?) throws {
        if let limit, !(1...Selection.maximumLimit).contains(limit) {
            throw WireError(.filter, "limit must be a whole number from 1 to \(Selection.maximumLimit)", evidence: "\(limit)")
        }
        self.init(uncheckedFilter: filter, limit: limit)
    }

    private init(uncheckedFilter filter: Filter?, limit: Int?) {
        self.filter = filter
        self.matcher = filter.map(FilterMatcher.init)
        self.limit = limit
    }

    /// Parses the `filter` and `limit` query parameters (either may be absent).
    public init(filter filterText: String?, limit limitText: String?) throws {
        let filter = try filterText.map { try Filter(parsing: $0) }
        var limit: Int?
        if let limitText {
            guard limitText.utf8.count <= 10, limitText.utf8.allSatisfy({ (0x30...0x39).contains($0) }), let value = Int(limitText) else {
                throw WireError(
                    .filter, "limit must be a whole number from 1 to \(Selection.maximumLimit)", evidence: String(reflecting: String(limitText.prefix(40))))
            }
            limit = value
        }
        try self.init(filter: filter, limit: limit)
    }

    /// Whether this selects the whole collection.
    public var isEverything: Bool { filter == nil && limit == nil }

    /// The canonical filter text (sorted keys, canonical numbers), as sent in the `filter` parameter.
    public var filterText: String? { filter.map { String(decoding: $0.json.canonicalBytes, as: UTF8.self) } }

    /// 16 hex digits of SHA-256 over the canonical filter and the limit: equal selections, equal fingerprints.
    public var fingerprint: String {
        let text = "\(filterText ?? "")\n\(limit.map(String.init) ?? "")"
        return SHA256.shortHex(Array(text.utf8))
    }

    /// Whether the record with canonical JSON `body` matches the filter (the limit aside).
    public func matches(body: some Collection<UInt8>) -> Bool { matcher?.matches(body: body) ?? true }

    /// Whether the record with canonical JSON `body` matches the filter (the limit is not
    /// considered): the same as the generic form, without its cost per call.
    public func matches(body: [UInt8]) -> Bool { matcher?.matches(body: body) ?? true }

    /// The query string that asks for this selection, `filter=<percent-encoded JSON>&limit=<N>`
    /// (either part absent when unset; empty for the whole collection).
    public var query: String {
        var parts: [String] = []
        if let filterText {
            var encoded = "filter="
            for byte in filterText.utf8 {
                switch byte {
                case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                    UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
                    encoded.unicodeScalars.append(Unicode.Scalar(byte))
                default:
                    let hex = Array("0123456789ABCDEF".unicodeScalars)
                    encoded += "%"
                    encoded.unicodeScalars.append(hex[Int(byte >> 4)])
                    encoded.unicodeScalars.append(hex[Int(byte & 0xF)])
                }
            }
            parts.append(encoded)
        }
        if let limit { parts.append("limit=\(limit)") }
        return parts.joined(separator: "&")
    }

    /// Whether a record's JSON object matches the filter (the limit aside).
    public func matches(_ record: JSONValue) -> Bool { filter?.matches(record) ?? true }
}

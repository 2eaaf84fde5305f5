/// The one ordering of JSON values that filters compare by (docs/PROTOCOL.md, "Selections").
///
/// - `null` equals `null`; booleans: `false < true`.
/// - Numbers by their exact decimal value (`1`, `1.0` and `1e0` are equal; no binary rounding).
/// - Strings by Unicode code points (the order of their UTF-8 bytes).
/// - Values of different kinds, and arrays or objects, are `unordered`: never equal, less or greater.
public enum JSONOrder: Sendable, Equatable {
    /// The left value is smaller.
    case less
    /// Equal values.
    case equal
    /// The left value is larger.
    case greater
    /// Not comparable: different kinds, or an array or object.
    case unordered

    /// Compares two JSON values.
    public static func compare(_ lhs: JSONValue, _ rhs: JSONValue) -> JSONOrder {
        switch (lhs, rhs) {
        case (.null, .null): return .equal
        case (.bool(let a), .bool(let b)): return a == b ? .equal : (!a ? .less : .greater)
        case (.string(let a), .string(let b)):
            // Code points, not Swift's `==` (which calls "é" and "e\u{301}" equal): the server's
            // SQLite, a replica's index and every other client compare the bytes.
            if a.utf8.elementsEqual(b.utf8) { return .equal }
            return a.utf8.lexicographicallyPrecedes(b.utf8) ? .less : .greater
        case (.number(let a), .number(let b)):
            if a == b { return .equal }  // canonical texts: equal values print the same
            return DecimalText(a).compare(DecimalText(b))
        default: return .unordered
        }
    }
}

/// A canonical number's text as sign, significant digits and the exponent of its first digit.
struct DecimalText {
    let negative: Bool
    /// Significant digits, no leading or trailing zeros; empty for zero.
    let digits: [UInt8]
    /// The value is 0.d1d2d3… × 10^exponent.
    let exponent: Int

    init(_ text: String) {
        var bytes = Array(text.utf8)
        negative = bytes.first == UInt8(ascii: "-")
        if negative { bytes.removeFirst() }
        var exponentPart = 0
        if let e = bytes.firstIndex(where: { $0 == UInt8(ascii: "e") || $0 == UInt8(ascii: "E") }) {
            exponentPart = Int(String(decoding: bytes[(e + 1)...].filter { $0 != UInt8(ascii: "+") }, as: UTF8.self)) ?? 0
            bytes = Array(bytes[..<e])
        }
        let point = bytes.firstIndex(of: UInt8(ascii: ".")) ?? bytes.count
        var all = bytes.filter { $0 != UInt8(ascii: ".") }
        var leading = 0
        while leading < all.count, all[leading] == UInt8(ascii: "0") { leading += 1 }
        all.removeFirst(leading)
        while let last = all.last, last == UInt8(ascii: "0") { all.removeLast() }
        digits = all
        exponent = point - leading + exponentPart
    }

    func compare(_ other: DecimalText) -> JSONOrder {
        let zero = digits.isEmpty
        let otherZero = other.digits.isEmpty
        if zero && otherZero { return .equal }
        // Sign first (zero sits between the signs).
        let sign = zero ? 0 : (negative ? -1 : 1)
        let otherSign = otherZero ? 0 : (other.negative ? -1 : 1)
        if sign != otherSign { return sign < otherSign ? .less : .greater }
        var magnitude: JSONOrder
        if exponent != other.exponent {
            magnitude = exponent < other.exponent ? .less : .greater
        } else if digits == other.digits {
            magnitude = .equal
        } else {
            magnitude = digits.lexicographicallyPrecedes(other.digits) ? .less : .greater
        }
        if sign < 0 { magnitude = magnitude == .less ? .greater : (magnitude == .greater ? .less : magnitude) }
        return magnitude
    }
}

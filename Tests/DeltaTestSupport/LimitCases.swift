/// JSON texts at and around every limit of the record format (docs/PROTOCOL.md, *Records*):
/// number length and exponent, as sent and once canonical; string bytes after escapes; id
/// bytes; nesting depth. Random where the space is large, so the seed decides which.
public enum LimitCases {
    /// Number texts around the 1,024-byte and ±100,000-exponent limits, in many spellings.
    public static func numbers(_ random: inout SeededGenerator) -> [String] {
        var out: [String] = []
        // Exponents that land exactly on, or one past, the limit once canonical.
        for (mantissa, shift) in [("1000", 3), ("0.001", -3), ("10", 1), ("123.45", 2), ("0.5", -1)] {
            for limit in [99_999, 100_000, 100_001] {
                out.append("\(mantissa)e\(limit - shift)")
                out.append("-\(mantissa)e-\(limit + shift)")
            }
        }
        out += ["1e100000", "1e-100000", "1E+100000", "1e100001", "1e-100001", "0e100001", "0.0e-100000"]
        // Long digit strings: integers past 21 digits turn scientific and gain a point and an exponent.
        for length in [1_015, 1_016, 1_017, 1_018, 1_019, 1_020, 1_023, 1_024, 1_025] {
            out.append(digits(length, &random))
            out.append("1" + String(repeating: "0", count: length - 1))
            out.append(String(repeating: "9", count: length))
        }
        // 1,024 bytes that move their point, lose or gain a zero once canonical.
        out.append(String(repeating: "1", count: 1_018) + "e-1023")
        out.append(String(repeating: "1", count: 1_018) + "e-1018")
        out.append("0." + String(repeating: "0", count: 5) + digits(1_017, &random))
        out.append("0." + String(repeating: "0", count: 6) + digits(1_016, &random))
        out.append("-0." + digits(1_021, &random))
        out.append(digits(21, &random) + "." + digits(1_002, &random))
        // Random spellings: sign, integer, fraction and exponent of random lengths.
        for _ in 0..<60 {
            var text = Bool.random(using: &random) ? "-" : ""
            text += digits(Int.random(in: 1...600, using: &random), &random)
            if Bool.random(using: &random) { text += "." + digits(Int.random(in: 1...600, using: &random), &random) }
            if Bool.random(using: &random) {
                let exponent = Int.random(in: -100_000...100_000, using: &random)
                text += ["e", "E"].randomElement(using: &random)! + (exponent >= 0 && Bool.random(using: &random) ? "+" : "") + String(exponent)
            }
            out.append(text)
        }
        return out
    }

    /// String members (JSON text, with quotes) around the 1 MiB limit on bytes after escapes,
    /// each under 1 MiB + 8 KiB as sent, and escapes that shrink or grow once canonical.
    public static func strings() -> [String] {
        let mib = 1 << 20
        let escaped = String(repeating: "\\u00e9", count: 1_000)
        return [
            "\"" + String(repeating: "a", count: mib) + "\"",
            "\"" + String(repeating: "a", count: mib + 1) + "\"",
            "\"" + escaped + String(repeating: "é", count: mib / 2 - 1_000) + "\"",
            "\"" + escaped + String(repeating: "é", count: mib / 2 - 1_000) + "a\"",
            "\"" + String(repeating: "\\ud83d\\ude00", count: 1_000) + String(repeating: "😀", count: mib / 4 - 1_000) + "\"",
            "\"" + String(repeating: "\\ud83d\\ude00", count: 1_000) + String(repeating: "😀", count: mib / 4 - 1_000) + "\\/\"",
            // Grow once canonical: \b and \f are written \u0008 and \u000c.
            "\"" + String(repeating: "\\b\\f\\/\\u0001\\n", count: 30_000) + "\"",
        ]
    }

    /// Ids (JSON text, with quotes) around the 512-byte limit, some spelled with escapes.
    public static func ids() -> [String] {
        var out: [String] = []
        for length in [511, 512, 513] {
            let odd = String(repeating: "i", count: length % 2)
            out.append("\"" + String(repeating: "i", count: length) + "\"")
            out.append("\"" + String(repeating: "é", count: length / 2) + odd + "\"")
            out.append("\"" + String(repeating: "\\u00e9", count: length / 2) + odd + "\"")
        }
        return out
    }

    /// A value that makes a record `levels` deep, counting the record object as level 1.
    public static func nested(record levels: Int, arrays: Bool) -> String {
        let inner = levels - 1
        return arrays
            ? String(repeating: "[", count: inner) + "1" + String(repeating: "]", count: inner)
            : String(repeating: "{\"k\":", count: inner) + "1" + String(repeating: "}", count: inner)
    }

    private static func digits(_ count: Int, _ random: inout SeededGenerator) -> String {
        var out = String(UInt8.random(in: 1...9, using: &random))
        for _ in 1..<max(count, 1) { out += String(UInt8.random(in: 0...9, using: &random)) }
        return out
    }
}

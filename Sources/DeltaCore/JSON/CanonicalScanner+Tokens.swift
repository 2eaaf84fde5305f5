extension CanonicalScanner {
    /// Scans a string from its opening quote to past its closing one. Nil unless it is valid
    /// UTF-8 written the canonical way (raw bytes, and only the escapes `JSONValue.writeString`
    /// writes); otherwise whether it holds escapes.
    mutating func string() -> Bool? {
        index += 1
        let start = index
        var escaped = false
        while index < bytes.count {
            // Eight plain bytes at a time: no quote, backslash, control or non-ASCII byte among them.
            while index + 8 <= bytes.count, Self.plainWord(UnsafeRawPointer(bytes.baseAddress! + index).loadUnaligned(as: UInt64.self)) {
                index += 8
            }
            guard index < bytes.count else { break }
            let byte = bytes[index]
            if byte == UInt8(ascii: "\"") {
                guard index - start <= limits.maximumStringBytes else { return nil }
                index += 1
                return escaped
            }
            if byte == UInt8(ascii: "\\") {
                guard let length = canonicalEscape(at: index) else { return nil }
                escaped = true
                index += length
            } else if byte < 0x20 {
                return nil
            } else if byte < 0x80 {
                index += 1
            } else {
                guard let length = utf8Sequence(at: index) else { return nil }
                index += length
            }
        }
        return nil
    }

    /// Whether none of the eight bytes in `word` is `"`, `\\`, below 0x20 or above 0x7F
    /// (the classic "has a zero byte" tests on the word and its XORs).
    @inline(__always)
    private static func plainWord(_ word: UInt64) -> Bool {
        let ones: UInt64 = 0x0101_0101_0101_0101
        let highs: UInt64 = 0x8080_8080_8080_8080
        let quote = word ^ (ones &* 0x22)
        let backslash = word ^ (ones &* 0x5C)
        let zeroQuote = (quote &- ones) & ~quote
        let zeroBackslash = (backslash &- ones) & ~backslash
        let control = (word &- ones &* 0x20) & ~word
        return (zeroQuote | zeroBackslash | control | word) & highs == 0
    }

    /// The length of the escape at `at` when it is one the canonical form writes: `\"`, `\\`,
    /// `\n`, `\r`, `\t`, or `\u00xx` (lowercase hex) for the other control characters.
    private func canonicalEscape(at start: Int) -> Int? {
        guard start + 1 < bytes.count else { return nil }
        switch bytes[start + 1] {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "n"), UInt8(ascii: "r"), UInt8(ascii: "t"): return 2
        case UInt8(ascii: "u"):
            guard start + 5 < bytes.count, bytes[start + 2] == UInt8(ascii: "0"), bytes[start + 3] == UInt8(ascii: "0"),
                let high = Self.lowercaseHex(bytes[start + 4]), high <= 1, let low = Self.lowercaseHex(bytes[start + 5])
            else { return nil }
            let scalar = high << 4 | low
            return scalar == 0x09 || scalar == 0x0A || scalar == 0x0D ? nil : 6
        default: return nil
        }
    }

    private static func lowercaseHex(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return byte - UInt8(ascii: "a") + 10
        default: return nil
        }
    }

    /// The length of the well-formed UTF-8 sequence of two to four bytes at `at` (no overlong
    /// forms, no surrogates, nothing above U+10FFFF), or nil.
    private func utf8Sequence(at start: Int) -> Int? {
        let lead = bytes[start]
        let length: Int
        var low: UInt8 = 0x80
        var high: UInt8 = 0xBF
        switch lead {
        case 0xC2...0xDF: length = 2
        case 0xE0:
            length = 3
            low = 0xA0
        case 0xE1...0xEC, 0xEE...0xEF: length = 3
        case 0xED:
            length = 3
            high = 0x9F
        case 0xF0:
            length = 4
            low = 0x90
        case 0xF1...0xF3: length = 4
        case 0xF4:
            length = 4
            high = 0x8F
        default: return nil
        }
        guard start + length <= bytes.count else { return nil }
        let second = bytes[start + 1]
        guard second >= low && second <= high else { return nil }
        for offset in 2..<length where bytes[start + offset] & 0xC0 != 0x80 { return nil }
        return length
    }

    /// The decoded bytes of a string's contents already checked by `string()`.
    func decoded(_ range: Range<Int>) -> [UInt8] {
        var out: [UInt8] = []
        var position = range.lowerBound
        while position < range.upperBound {
            let byte = bytes[position]
            guard byte == UInt8(ascii: "\\") else {
                out.append(byte)
                position += 1
                continue
            }
            switch bytes[position + 1] {
            case UInt8(ascii: "n"): out.append(0x0A)
            case UInt8(ascii: "r"): out.append(0x0D)
            case UInt8(ascii: "t"): out.append(0x09)
            case UInt8(ascii: "u"):
                out.append(Self.lowercaseHex(bytes[position + 4])! << 4 | Self.lowercaseHex(bytes[position + 5])!)
                position += 4
            default: out.append(bytes[position + 1])
            }
            position += 2
        }
        return out
    }

    /// Scans a number token (the bytes the parser would take as one) and says whether it is
    /// spelled canonically: plain integers and decimals by rule, anything else by `CanonicalNumber`.
    mutating func number() -> Bool {
        let start = index
        var plain = true
        scan: while index < bytes.count {
            switch bytes[index] {
            case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "."): index += 1
            case UInt8(ascii: "-"), UInt8(ascii: "+"), UInt8(ascii: "e"), UInt8(ascii: "E"):
                if index > start { plain = false }
                index += 1
            default: break scan
            }
        }
        let token = UnsafeBufferPointer(rebasing: bytes[start..<index])
        guard token.count <= CanonicalNumber.maximumLength else { return false }
        if plain, let canonical = Self.plainIsCanonical(token) { return canonical }
        guard let canonical = CanonicalNumber.make(token) else { return false }
        return canonical.utf8.elementsEqual(token)
    }

    /// For `-?digits(.digits)?`: whether it is canonical, or nil when the rule does not decide.
    private static func plainIsCanonical(_ token: UnsafeBufferPointer<UInt8>) -> Bool? {
        var position = token.first == UInt8(ascii: "-") ? 1 : 0
        let negative = position == 1
        let integerStart = position
        while position < token.count, token[position] != UInt8(ascii: ".") { position += 1 }
        let integer = UnsafeBufferPointer(rebasing: token[integerStart..<position])
        guard !integer.isEmpty, integer.allSatisfy({ $0 != UInt8(ascii: "-") }) else { return nil }
        if integer.count > 1 && integer[0] == UInt8(ascii: "0") { return nil }
        guard position < token.count else {
            // An integer: canonical unless it is -0 or too long for plain notation.
            if negative && integer[0] == UInt8(ascii: "0") { return false }
            return integer.count <= 21 ? true : nil
        }
        let fraction = UnsafeBufferPointer(rebasing: token[(position + 1)...])
        guard let last = fraction.last, last != UInt8(ascii: "0"), !fraction.contains(UInt8(ascii: ".")) else { return nil }
        if integer[0] != UInt8(ascii: "0") { return integer.count <= 21 ? true : nil }
        // 0.000ddd: plain notation for up to five zeros after the point.
        let zeros = fraction.prefix { $0 == UInt8(ascii: "0") }.count
        return zeros <= 5 ? true : nil
    }
}

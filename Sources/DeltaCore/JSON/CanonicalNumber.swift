/// The canonical text of a JSON number: the same decimal value always prints the same way.
///
/// The value is kept exactly (no conversion to binary floating point, so no digits are lost):
/// `1.0`, `1`, `10e-1` and `0.1e1` all become `1`; `-0` becomes `0`; `1e21` becomes `1e+21`.
/// The layout follows ECMAScript's `Number.prototype.toString` rules applied to the exact decimal
/// digits: plain notation for decimal exponents from -7 to 20, scientific notation otherwise.
///
/// The limits hold for the text as sent and for its canonical text alike, so every number a
/// parser accepts is one that every reader of its canonical form accepts too: the canonical
/// text can be longer than the text sent (`1e20` is `100000000000000000000`; a 1,024-byte
/// `111…1e-1023` gains a point) or further out (`1000e99998` is `1e+100001`).
package enum CanonicalNumber {
    /// Longest number text accepted, in bytes, as sent and once canonical.
    static let maximumLength = 1024
    /// Largest decimal exponent magnitude accepted, as written and once canonical.
    static let maximumExponent = 100_000

    /// What `parse` makes of a number's text.
    enum Outcome: Equatable {
        /// The canonical text.
        case canonical(String)
        /// Not RFC 8259 number syntax, or longer than `maximumLength` or with a written exponent
        /// past `maximumExponent` as sent.
        case invalid
        /// Valid as sent, but its canonical text (given) breaks a limit; `reason` says which.
        case outOfRange(String, reason: String)
    }

    /// The canonical text for a JSON number, or nil when `text` is not RFC 8259 number syntax
    /// or breaks a limit (as sent or once canonical).
    static func make(_ text: UnsafeBufferPointer<UInt8>) -> String? {
        if case .canonical(let number) = parse(text) { return number }
        return nil
    }

    /// The canonical text for a JSON number, or why there is none.
    static func parse(_ text: UnsafeBufferPointer<UInt8>) -> Outcome {
        guard let (negative, digits, exponent) = decompose(text) else { return .invalid }
        let (number, shownExponent) = layout(negative: negative, digits: digits, exponent: exponent)
        if number.utf8.count > maximumLength {
            return .outOfRange(number, reason: "longer than \(maximumLength) bytes once written canonically (\(number.utf8.count) bytes)")
        }
        if abs(shownExponent) > maximumExponent {
            return .outOfRange(number, reason: "exponent beyond ±\(maximumExponent) once written canonically")
        }
        return .canonical(number)
    }

    /// The sign, digits and decimal exponent of a number's text (`digits × 10^exponent`), or nil
    /// when it is not RFC 8259 number syntax, or longer or further out than the limits as sent.
    private static func decompose(_ text: UnsafeBufferPointer<UInt8>) -> (negative: Bool, digits: [UInt8], exponent: Int)? {
        guard !text.isEmpty, text.count <= maximumLength else { return nil }
        var index = 0
        let negative = text[0] == UInt8(ascii: "-")
        if negative { index += 1 }
        var digits: [UInt8] = []
        digits.reserveCapacity(text.count)
        // Integer part: 0 or [1-9][0-9]*.
        guard index < text.count, isDigit(text[index]) else { return nil }
        if text[index] == UInt8(ascii: "0") {
            index += 1
            if index < text.count, isDigit(text[index]) { return nil }
        } else {
            while index < text.count, isDigit(text[index]) {
                digits.append(text[index])
                index += 1
            }
        }
        var exponent = 0
        if index < text.count, text[index] == UInt8(ascii: ".") {
            index += 1
            guard index < text.count, isDigit(text[index]) else { return nil }
            while index < text.count, isDigit(text[index]) {
                digits.append(text[index])
                exponent -= 1
                index += 1
            }
        }
        if index < text.count, text[index] == UInt8(ascii: "e") || text[index] == UInt8(ascii: "E") {
            index += 1
            var exponentNegative = false
            if index < text.count, text[index] == UInt8(ascii: "+") || text[index] == UInt8(ascii: "-") {
                exponentNegative = text[index] == UInt8(ascii: "-")
                index += 1
            }
            guard index < text.count, isDigit(text[index]) else { return nil }
            var written = 0
            while index < text.count, isDigit(text[index]) {
                written = written * 10 + Int(text[index] - UInt8(ascii: "0"))
                if written > maximumExponent { return nil }
                index += 1
            }
            exponent += exponentNegative ? -written : written
        }
        guard index == text.count else { return nil }
        return (negative, digits, exponent)
    }

    private static func isDigit(_ byte: UInt8) -> Bool {
        byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")
    }

    /// Prints `digits × 10^exponent` (digits may carry leading or trailing zeros), with the
    /// exponent the text shows (0 in plain notation).
    private static func layout(negative: Bool, digits raw: [UInt8], exponent raw10: Int) -> (text: String, exponent: Int) {
        var digits = raw[...]
        while let first = digits.first, first == UInt8(ascii: "0") { digits = digits.dropFirst() }
        var exponent = raw10
        while let last = digits.last, last == UInt8(ascii: "0") {
            digits = digits.dropLast()
            exponent += 1
        }
        if digits.isEmpty { return ("0", 0) }
        var out: [UInt8] = negative ? [UInt8(ascii: "-")] : []
        var shown = 0
        let count = digits.count
        let point = count + exponent  // position of the decimal point from the first digit
        if count <= point && point <= 21 {
            out.append(contentsOf: digits)
            out.append(contentsOf: repeatElement(UInt8(ascii: "0"), count: point - count))
        } else if 0 < point && point <= 21 {
            out.append(contentsOf: digits.prefix(point))
            out.append(UInt8(ascii: "."))
            out.append(contentsOf: digits.dropFirst(point))
        } else if -6 < point && point <= 0 {
            out.append(contentsOf: "0.".utf8)
            out.append(contentsOf: repeatElement(UInt8(ascii: "0"), count: -point))
            out.append(contentsOf: digits)
        } else {
            out.append(digits.first!)
            if count > 1 {
                out.append(UInt8(ascii: "."))
                out.append(contentsOf: digits.dropFirst())
            }
            shown = point - 1
            out.append(contentsOf: (shown >= 0 ? "e+\(shown)" : "e-\(-shown)").utf8)
        }
        return (String(decoding: out, as: UTF8.self), shown)
    }
}

extension CanonicalNumber {
    /// The canonical text for the number `text`, or nil when it is not JSON number syntax.
    package static func canonical(_ text: String) -> String? {
        var text = text
        return text.withUTF8 { make($0) }
    }
}

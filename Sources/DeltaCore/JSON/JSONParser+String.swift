extension JSONParser {
    /// Parses a string starting at the opening quote; validates UTF-8 and escapes.
    mutating func parseString() throws -> String {
        index += 1
        let start = index
        // Fast path: no escapes; validate and copy the bytes as they are.
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "\"") {
                let raw = UnsafeBufferPointer(rebasing: bytes[start..<index])
                index += 1
                return try validated(raw, at: start)
            }
            if byte == UInt8(ascii: "\\") { break }
            if byte < 0x20 { throw fail("control character in string") }
            index += 1
        }
        guard index < bytes.count else { throw endOfInput() }
        var scratch = Array(UnsafeBufferPointer(rebasing: bytes[start..<index]))
        while true {
            guard index < bytes.count else { throw endOfInput() }
            let byte = bytes[index]
            if byte == UInt8(ascii: "\"") {
                index += 1
                return try scratch.withUnsafeBufferPointer { try validated($0, at: start) }
            }
            if byte < 0x20 { throw fail("control character in string") }
            if byte != UInt8(ascii: "\\") {
                scratch.append(byte)
                index += 1
            } else {
                try parseEscape(into: &scratch)
            }
            if scratch.count > limits.maximumStringBytes {
                throw fail("string longer than \(limits.maximumStringBytes) bytes")
            }
        }
    }

    private mutating func validated(_ raw: UnsafeBufferPointer<UInt8>, at start: Int) throws -> String {
        if raw.count > limits.maximumStringBytes {
            index = start
            throw fail("string longer than \(limits.maximumStringBytes) bytes")
        }
        // ASCII (most strings) is valid UTF-8 as it is: the check below decodes and compares, and
        // a generic validator showed in a user's delta profile.
        if raw.allSatisfy({ $0 < 0x80 }) { return String(decoding: raw, as: UTF8.self) }
        guard let text = String(validUTF8: raw) else {
            index = start
            throw fail("string is not valid UTF-8")
        }
        return text
    }

    private mutating func parseEscape(into scratch: inout [UInt8]) throws {
        guard index + 1 < bytes.count else { throw endOfInput() }
        let escape = bytes[index + 1]
        index += 2
        switch escape {
        case UInt8(ascii: "\""): scratch.append(UInt8(ascii: "\""))
        case UInt8(ascii: "\\"): scratch.append(UInt8(ascii: "\\"))
        case UInt8(ascii: "/"): scratch.append(UInt8(ascii: "/"))
        case UInt8(ascii: "b"): scratch.append(0x08)
        case UInt8(ascii: "f"): scratch.append(0x0C)
        case UInt8(ascii: "n"): scratch.append(0x0A)
        case UInt8(ascii: "r"): scratch.append(0x0D)
        case UInt8(ascii: "t"): scratch.append(0x09)
        case UInt8(ascii: "u"):
            var scalar = try hex4()
            if (0xD800..<0xDC00).contains(scalar) {
                guard index + 1 < bytes.count else { throw endOfInput() }
                guard bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u") else {
                    throw fail("unpaired UTF-16 surrogate escape")
                }
                index += 2
                let low = try hex4()
                guard (0xDC00..<0xE000).contains(low) else { throw fail("unpaired UTF-16 surrogate escape") }
                scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
            } else if (0xDC00..<0xE000).contains(scalar) {
                throw fail("unpaired UTF-16 surrogate escape")
            }
            guard let unicode = Unicode.Scalar(scalar) else { throw fail("invalid \\u escape") }
            scratch.append(contentsOf: Array(String(Character(unicode)).utf8))
        default:
            index -= 2
            throw fail("invalid escape sequence")
        }
    }

    private mutating func hex4() throws -> UInt32 {
        guard index + 4 <= bytes.count else { throw endOfInput() }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let byte = bytes[index]
            let digit: UInt32
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = UInt32(byte - UInt8(ascii: "0"))
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = UInt32(byte - UInt8(ascii: "a") + 10)
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = UInt32(byte - UInt8(ascii: "A") + 10)
            default: throw fail("invalid \\u escape")
            }
            value = value << 4 | digit
            index += 1
        }
        return value
    }
}

/// A strict RFC 8259 parser over a byte buffer, producing canonical `JSONValue`s.
///
/// Strict means: no trailing commas, no comments, no lone surrogates, valid UTF-8 only,
/// no duplicate keys; nesting and string sizes bounded by `JSONLimits`.
struct JSONParser {
    let bytes: UnsafeBufferPointer<UInt8>
    let limits: JSONLimits
    var index = 0
    var depth = 0
    /// Set when parsing failed only because the input ended: more bytes might complete it.
    private(set) var failedAtEnd = false

    init(_ bytes: UnsafeBufferPointer<UInt8>, limits: JSONLimits, start: Int = 0) {
        self.bytes = bytes
        self.limits = limits
        self.index = start
    }

    /// Parses one value and requires only white space after it.
    mutating func parseDocument() throws -> JSONValue {
        let value = try parseValue()
        skipWhitespace()
        if index < bytes.count {
            throw fail("unexpected data after the JSON value")
        }
        return value
    }

    mutating func skipWhitespace() {
        while index < bytes.count {
            switch bytes[index] {
            case 0x20, 0x09, 0x0A, 0x0D: index += 1
            default: return
            }
        }
    }

    mutating func peek() -> UInt8? {
        skipWhitespace()
        return index < bytes.count ? bytes[index] : nil
    }

    mutating func fail(_ reason: String) -> WireError {
        WireError(.json, reason, evidence: "at byte \(index)")
    }

    mutating func endOfInput() -> WireError {
        failedAtEnd = true
        return WireError(.json, "unexpected end of input", evidence: "at byte \(index)")
    }

    mutating func parseValue() throws -> JSONValue {
        guard let byte = peek() else { throw endOfInput() }
        switch byte {
        case UInt8(ascii: "{"): return try parseObject()
        case UInt8(ascii: "["): return try parseArray()
        case UInt8(ascii: "\""): return .string(try parseString())
        case UInt8(ascii: "t"):
            try expectLiteral("true")
            return .bool(true)
        case UInt8(ascii: "f"):
            try expectLiteral("false")
            return .bool(false)
        case UInt8(ascii: "n"):
            try expectLiteral("null")
            return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return .number(try parseNumber())
        default: throw fail("unexpected character \(String(reflecting: String(UnicodeScalar(byte))))")
        }
    }

    private mutating func expectLiteral(_ literal: StaticString) throws {
        let start = index
        for expected in UnsafeBufferPointer(start: literal.utf8Start, count: literal.utf8CodeUnitCount) {
            guard index < bytes.count else { throw endOfInput() }
            guard bytes[index] == expected else {
                index = start
                throw fail("invalid literal, expected \(literal)")
            }
            index += 1
        }
    }

    private mutating func enter() throws {
        depth += 1
        if depth > limits.maximumDepth {
            throw fail("nesting deeper than \(limits.maximumDepth) levels")
        }
    }

    private mutating func parseObject() throws -> JSONValue {
        let start = index
        try enter()
        index += 1
        var members: [JSONMember] = []
        guard let first = peek() else { throw endOfInput() }
        if first == UInt8(ascii: "}") {
            index += 1
            depth -= 1
            return .object([])
        }
        while true {
            guard let quote = peek() else { throw endOfInput() }
            guard quote == UInt8(ascii: "\"") else { throw fail("expected a string key") }
            let key = try parseString()
            guard let colon = peek() else { throw endOfInput() }
            guard colon == UInt8(ascii: ":") else { throw fail("expected ':' after key") }
            index += 1
            do {
                members.append(JSONMember(key: key, value: try parseValue()))
            } catch let error as WireError {
                throw error.within(key)
            }
            guard let next = peek() else { throw endOfInput() }
            index += 1
            if next == UInt8(ascii: "}") { break }
            guard next == UInt8(ascii: ",") else {
                index -= 1
                throw fail("expected ',' or '}' in object")
            }
        }
        depth -= 1
        return .object(try JSONValue.sortedMembers(members, at: start))
    }

    private mutating func parseArray() throws -> JSONValue {
        try enter()
        index += 1
        var items: [JSONValue] = []
        guard let first = peek() else { throw endOfInput() }
        if first == UInt8(ascii: "]") {
            index += 1
            depth -= 1
            return .array([])
        }
        while true {
            do {
                items.append(try parseValue())
            } catch let error as WireError {
                throw error.within(String(items.count))
            }
            guard let next = peek() else { throw endOfInput() }
            index += 1
            if next == UInt8(ascii: "]") { break }
            guard next == UInt8(ascii: ",") else {
                index -= 1
                throw fail("expected ',' or ']' in array")
            }
        }
        depth -= 1
        return .array(items)
    }

    private mutating func parseNumber() throws -> String {
        let start = index
        while index < bytes.count {
            switch bytes[index] {
            case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "+"),
                UInt8(ascii: "."), UInt8(ascii: "e"), UInt8(ascii: "E"):
                index += 1
            default:
                return try canonical(start)
            }
        }
        // The number touches the end of the input: in a stream, more digits may follow in the next chunk.
        failedAtEnd = true
        return try canonical(start)
    }

    private mutating func canonical(_ start: Int) throws -> String {
        let text = UnsafeBufferPointer(rebasing: bytes[start..<index])
        switch CanonicalNumber.parse(text) {
        case .canonical(let number):
            return number
        case .invalid:
            index = start
            throw fail("invalid number \(String(reflecting: String(decoding: text.prefix(40), as: UTF8.self)))")
        case .outOfRange(let number, let reason):
            index = start
            throw fail("number \(String(reflecting: String(number.prefix(40)))) is \(reason)")
        }
    }
}

/// A JSON value as DeltaSnapshot stores it: object members sorted by key, numbers as exact decimal text.
///
/// Two documents that differ only in key order, white space, string escapes or the way a number
/// is written (`1.0`, `1`, `1e0`) parse to equal values and print to the same canonical bytes.
public indirect enum JSONValue: Sendable, Equatable {
    /// `null`.
    case null
    /// `true` or `false`.
    case bool(Bool)
    /// A number, as its canonical decimal text (see `CanonicalNumber`).
    case number(String)
    /// A string.
    case string(String)
    /// An array.
    case array([JSONValue])
    /// An object whose members are sorted by the UTF-8 bytes of their keys; keys are unique.
    case object([JSONMember])

    /// The canonical bytes of this value: no white space, sorted keys, minimal string escapes.
    public var canonicalBytes: [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(64)
        write(into: &out)
        return out
    }

    /// Appends the canonical bytes of this value to `out`.
    public func write(into out: inout [UInt8]) {
        switch self {
        case .null: out.append(contentsOf: "null".utf8)
        case .bool(let value): out.append(contentsOf: (value ? "true" : "false").utf8)
        case .number(let text): out.append(contentsOf: text.utf8)
        case .string(let text): JSONValue.writeString(text, into: &out)
        case .array(let items):
            out.append(UInt8(ascii: "["))
            for (index, item) in items.enumerated() {
                if index > 0 { out.append(UInt8(ascii: ",")) }
                item.write(into: &out)
            }
            out.append(UInt8(ascii: "]"))
        case .object(let members):
            JSONValue.writeObject(members, into: &out)
        }
    }

    /// Appends an object with `members` in the order given (canonical values only if they are sorted).
    public static func writeObject(_ members: [JSONMember], into out: inout [UInt8]) {
        out.append(UInt8(ascii: "{"))
        for (index, member) in members.enumerated() {
            if index > 0 { out.append(UInt8(ascii: ",")) }
            writeString(member.key, into: &out)
            out.append(UInt8(ascii: ":"))
            member.value.write(into: &out)
        }
        out.append(UInt8(ascii: "}"))
    }

    /// Appends `text` as a JSON string, escaping only `"`, `\` and control characters.
    public static func writeString(_ text: String, into out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "\""): out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\"")])
            case UInt8(ascii: "\\"): out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\\")])
            case 0x0A: out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "n")])
            case 0x0D: out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "r")])
            case 0x09: out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "t")])
            case 0x00..<0x20:
                let hex = Array("0123456789abcdef".utf8)
                out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0")])
                out.append(hex[Int(byte >> 4)])
                out.append(hex[Int(byte & 0xF)])
            default: out.append(byte)
            }
        }
        out.append(UInt8(ascii: "\""))
    }

    /// The member named exactly `key` (the same code points), when this is an object that has one.
    public subscript(key: String) -> JSONValue? {
        guard case .object(let members) = self else { return nil }
        return members.first { $0.key.utf8.elementsEqual(key.utf8) }?.value
    }
}

extension JSONValue {
    /// Equal values print the same canonical bytes: strings compare by their UTF-8 bytes, as
    /// stores compare them, not by Swift's canonical equivalence ("é" precomposed and "e" with
    /// U+0301 are two values).
    public static func == (lhs: JSONValue, rhs: JSONValue) -> Bool {
        switch (lhs, rhs) {
        case (.null, .null): true
        case (.bool(let a), .bool(let b)): a == b
        case (.number(let a), .number(let b)): a.hasSameBytes(as: b)
        case (.string(let a), .string(let b)): a.hasSameBytes(as: b)
        case (.array(let a), .array(let b)): a == b
        case (.object(let a), .object(let b)): a == b
        default: false
        }
    }
}

/// One member of a JSON object.
public struct JSONMember: Sendable, Equatable {
    /// The member's key.
    public var key: String
    /// The member's value.
    public var value: JSONValue

    /// Creates a member.
    public init(key: String, value: JSONValue) {
        self.key = key
        self.value = value
    }

    /// Equal members: keys with the same UTF-8 bytes, and equal values.
    public static func == (lhs: JSONMember, rhs: JSONMember) -> Bool { lhs.key.hasSameBytes(as: rhs.key) && lhs.value == rhs.value }
}

extension JSONValue {
    /// Parses exactly one JSON document from `bytes` (surrounding white space allowed).
    public init(parsing bytes: some Collection<UInt8>, limits: JSONLimits = .default) throws {
        let value = try Array(bytes).withUnsafeBufferPointer { buffer -> JSONValue in
            var parser = JSONParser(buffer, limits: limits)
            let value = try parser.parseDocument()
            return value
        }
        self = value
    }

    /// Sorts members by key bytes and rejects duplicate keys.
    static func sortedMembers(_ members: [JSONMember], at offset: Int) throws -> [JSONMember] {
        let sorted = members.sorted { $0.key.utf8.lexicographicallyPrecedes($1.key.utf8) }
        var index = 1
        while index < sorted.count {
            // Keys are the same only byte for byte: Swift's == would also match canonically
            // equivalent spellings ("ö" and "o\u{308}"), which are two keys in JSON.
            if sorted[index].key.utf8.elementsEqual(sorted[index - 1].key.utf8) {
                throw WireError(.json, "duplicate key in object", evidence: "\(String(reflecting: sorted[index].key)) in the object at byte \(offset)")
            }
            index += 1
        }
        return sorted
    }
}

/// Bounds that keep hostile JSON from exhausting the stack or memory.
public struct JSONLimits: Sendable, Equatable {
    /// Deepest nesting of arrays and objects accepted.
    public var maximumDepth: Int
    /// Longest string accepted, in UTF-8 bytes.
    public var maximumStringBytes: Int

    /// Creates limits.
    public init(maximumDepth: Int = 64, maximumStringBytes: Int = 1 << 20) {
        self.maximumDepth = maximumDepth
        self.maximumStringBytes = maximumStringBytes
    }

    /// 64 levels of nesting, strings up to 1 MiB.
    public static let `default` = JSONLimits()

    /// These limits for a document that holds records `levels` containers deep (a push body,
    /// a push answer): a record may nest `maximumDepth` levels counting itself, whatever encloses
    /// it, so that every record one reader accepts, every other reader accepts too.
    public func enclosing(_ levels: Int) -> JSONLimits {
        JSONLimits(maximumDepth: maximumDepth + levels, maximumStringBytes: maximumStringBytes)
    }
}

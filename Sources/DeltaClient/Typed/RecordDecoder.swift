import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A `Decoder` over records' canonical JSON, for typed queries: the bytes are already valid,
/// compact JSON, so values are found by scanning, not parsed into a tree first. It handles what
/// a model's synthesized `Codable` asks for (objects, arrays, strings, numbers, booleans, null);
/// types `JSONDecoder` treats specially (`Date`, `Data`, `URL`, `Decimal`) and anything it cannot
/// read exactly as `JSONDecoder` would make it throw `Unsupported`, and the caller then decodes
/// with `JSONDecoder`. `RecordDecoderTests` holds it equal to `JSONDecoder` on models of every shape.
struct RecordDecoder: Decoder {
    /// Not readable here: decode with `JSONDecoder` instead.
    struct Unsupported: Error {}

    /// Set when anything in one decode threw, even if the model caught it (`try?`): the model's
    /// value may then differ from `JSONDecoder`'s, so the whole record goes to `JSONDecoder`.
    final class Fallback {
        var needed = false
    }

    let bytes: UnsafeBufferPointer<UInt8>
    /// The value: `start..<end` in `bytes`.
    let start: Int
    let end: Int
    let codingPath: [any CodingKey]
    let fallback: Fallback
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    /// Whether `decoder`'s settings leave nothing for this decoder to get wrong: no `userInfo`
    /// and the default keys (dates, data and the rest throw `Unsupported`, so their strategies
    /// are `JSONDecoder`'s to apply).
    static func stands(in decoder: JSONDecoder) -> Bool {
        guard decoder.userInfo.isEmpty, case .useDefaultKeys = decoder.keyDecodingStrategy else { return false }
        return true
    }

    /// Decodes `T` from the JSON `bytes`.
    static func decode<T: Decodable>(_ type: T.Type, from bytes: [UInt8]) throws -> T {
        try bytes.withUnsafeBufferPointer { buffer in
            var scanner = Scanner(bytes: buffer, at: 0)
            let end = try scanner.skipValue()
            let fallback = Fallback()
            let value = try RecordDecoder(bytes: buffer, start: 0, end: end, codingPath: [], fallback: fallback).decode(T.self)
            // Something threw and the model went on without it: JSONDecoder may not have thrown there.
            if fallback.needed { throw Unsupported() }
            return value
        }
    }

    /// Runs `body`; anything it throws marks the decode for `JSONDecoder` (`Fallback`), whether
    /// or not the model catches it. Every entry point a model calls goes through here.
    @inline(__always)
    func guarded<T>(_ body: () throws -> T) throws -> T {
        do { return try body() } catch {
            fallback.needed = true
            throw error
        }
    }

    func decode<T: Decodable>(_ type: T.Type) throws -> T {
        try guarded {
            if T.self == Date.self || T.self == Data.self || T.self == URL.self || T.self == Decimal.self { throw Unsupported() }
            return try T(from: self)
        }
    }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        try guarded { try keyedContainer(keyedBy: type) }
    }

    private func keyedContainer<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        guard start < end, bytes[start] == UInt8(ascii: "{") else { throw Unsupported() }
        var members: [Member] = []
        members.reserveCapacity(8)
        var scanner = Scanner(bytes: bytes, at: start + 1)
        if bytes[scanner.at] != UInt8(ascii: "}") {
            while true {
                // Keys are compared as bytes: one with an escape is left to JSONDecoder.
                let keyStart = scanner.at + 1
                let keyEnd = try scanner.plainString()
                try scanner.expect(UInt8(ascii: ":"))
                let valueStart = scanner.at
                let valueEnd = try scanner.skipValue()
                members.append(Member(keyStart: keyStart, keyEnd: keyEnd, start: valueStart, end: valueEnd))
                if bytes[scanner.at] == UInt8(ascii: ",") { scanner.at += 1 } else { break }
            }
        }
        return KeyedDecodingContainer(KeyedRecordContainer<Key>(decoder: self, members: members))
    }

    /// One member of an object: where its key's bytes and its value are.
    struct Member {
        let keyStart: Int
        let keyEnd: Int
        let start: Int
        let end: Int
    }

    /// Whether `member`'s key is the UTF-8 `wanted`.
    func matches(_ member: Member, _ wanted: UnsafeBufferPointer<UInt8>) -> Bool {
        guard wanted.count == member.keyEnd - member.keyStart else { return false }
        guard wanted.count > 0, let wantedBytes = wanted.baseAddress, let base = bytes.baseAddress else { return true }  // both empty
        return wantedBytes[0] == base[member.keyStart] && memcmp(wantedBytes, base + member.keyStart, wanted.count) == 0
    }

    /// An array of strings, read directly.
    func strings() throws -> [String] {
        guard start < end, bytes[start] == UInt8(ascii: "[") else { throw Unsupported() }
        var strings: [String] = []
        var scanner = Scanner(bytes: bytes, at: start + 1)
        if bytes[scanner.at] != UInt8(ascii: "]") {
            while true {
                strings.append(try scanner.string())
                if bytes[scanner.at] == UInt8(ascii: ",") { scanner.at += 1 } else { break }
            }
        }
        try scanner.expect(UInt8(ascii: "]"))
        return strings
    }

    /// The same decoder over another value, at the same coding path: for the primitives a
    /// container reads, which never ask for their path.
    func primitive(_ start: Int, _ end: Int) -> RecordDecoder {
        RecordDecoder(bytes: bytes, start: start, end: end, codingPath: codingPath, fallback: fallback)
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        try guarded { try arrayContainer() }
    }

    private func arrayContainer() throws -> any UnkeyedDecodingContainer {
        guard start < end, bytes[start] == UInt8(ascii: "[") else { throw Unsupported() }
        var elements: [(start: Int, end: Int)] = []
        elements.reserveCapacity(4)
        var scanner = Scanner(bytes: bytes, at: start + 1)
        if bytes[scanner.at] != UInt8(ascii: "]") {
            while true {
                let elementStart = scanner.at
                elements.append((elementStart, try scanner.skipValue()))
                if bytes[scanner.at] == UInt8(ascii: ",") { scanner.at += 1 } else { break }
            }
        }
        return UnkeyedRecordContainer(decoder: self, elements: elements)
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer { SingleRecordValue(decoder: self) }

    /// The decoder of a nested value.
    func nested(_ start: Int, _ end: Int, _ key: any CodingKey) -> RecordDecoder {
        RecordDecoder(bytes: bytes, start: start, end: end, codingPath: codingPath + [key], fallback: fallback)
    }

    var isNull: Bool { bytes[start] == UInt8(ascii: "n") }

    func bool() throws -> Bool {
        switch bytes[start] {
        case UInt8(ascii: "t"): return true
        case UInt8(ascii: "f"): return false
        default: throw Unsupported()
        }
    }

    func string() throws -> String {
        var scanner = Scanner(bytes: bytes, at: start)
        return try scanner.string()
    }

    /// The number's text, exactly as the record holds it.
    func number() throws -> Substring {
        let first = bytes[start]
        guard first == UInt8(ascii: "-") || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(first) else { throw Unsupported() }
        return Substring(String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<end]), as: UTF8.self))
    }

    /// An integer of type `T`: plain digits only (what `JSONDecoder` reads as exactly that integer).
    func integer<T: FixedWidthInteger>(_ type: T.Type) throws -> T {
        var index = start
        let negative = bytes[index] == UInt8(ascii: "-")
        if negative { index += 1 }
        guard index < end else { throw Unsupported() }
        var value: T = 0
        while index < end {
            let digit = bytes[index] &- UInt8(ascii: "0")
            guard digit < 10 else { throw Unsupported() }  // a fraction or an exponent: JSONDecoder's to judge
            let (times, overflow1) = value.multipliedReportingOverflow(by: 10)
            let (next, overflow2) = negative ? times.subtractingReportingOverflow(T(digit)) : times.addingReportingOverflow(T(digit))
            guard !overflow1, !overflow2 else { throw Unsupported() }
            value = next
            index += 1
        }
        return value
    }

    /// A number as a `Double` or a `Float`, each rounded once from the text, as `JSONDecoder`
    /// reads them (a `Float` made from the `Double` would round twice: another value, now and then).
    func floating<T: BinaryFloatingPoint & LosslessStringConvertible>(_ type: T.Type) throws -> T {
        guard let value = T(String(try number())), value.isFinite else { throw Unsupported() }
        return value
    }
}

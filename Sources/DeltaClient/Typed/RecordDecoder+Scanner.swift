import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Walks compact JSON: the canonical form records are stored in. Anything else (whitespace,
/// a truncated value) throws `RecordDecoder.Unsupported`.
struct Scanner {
    let bytes: UnsafeBufferPointer<UInt8>
    var at: Int

    mutating func expect(_ byte: UInt8) throws {
        guard at < bytes.count, bytes[at] == byte else { throw RecordDecoder.Unsupported() }
        at += 1
    }

    /// Skips one value; returns where it ends.
    mutating func skipValue() throws -> Int {
        guard at < bytes.count else { throw RecordDecoder.Unsupported() }
        switch bytes[at] {
        case UInt8(ascii: "\""):
            return try skipString()
        case UInt8(ascii: "{"), UInt8(ascii: "["):
            var depth = 0
            while at < bytes.count {
                switch bytes[at] {
                case UInt8(ascii: "\""):
                    _ = try skipString()
                    continue
                case UInt8(ascii: "{"), UInt8(ascii: "["):
                    depth += 1
                case UInt8(ascii: "}"), UInt8(ascii: "]"):
                    depth -= 1
                    if depth == 0 {
                        at += 1
                        return at
                    }
                default:
                    break
                }
                at += 1
            }
            throw RecordDecoder.Unsupported()
        default:
            // A number or a literal: up to the next delimiter.
            let start = at
            while at < bytes.count {
                let byte = bytes[at]
                if byte == UInt8(ascii: ",") || byte == UInt8(ascii: "}") || byte == UInt8(ascii: "]") { break }
                at += 1
            }
            guard at > start else { throw RecordDecoder.Unsupported() }
        }
        return at
    }

    /// Where the string whose content starts at `from` ends: the index of its closing quote,
    /// found with `memchr` (strings are most of a record's bytes); a quote is escaped when an
    /// odd number of backslashes precede it.
    func closingQuote(from: Int) throws -> Int {
        guard let base = bytes.baseAddress else { throw RecordDecoder.Unsupported() }
        var from = from
        while from < bytes.count {
            guard let found = memchr(base + from, Int32(UInt8(ascii: "\"")), bytes.count - from) else { break }
            let quote = UnsafeRawPointer(found).assumingMemoryBound(to: UInt8.self) - base
            var backslashes = 0
            while quote - backslashes - 1 >= from, bytes[quote - backslashes - 1] == UInt8(ascii: "\\") { backslashes += 1 }
            if backslashes % 2 == 0 { return quote }
            from = quote + 1
        }
        throw RecordDecoder.Unsupported()
    }

    /// Whether `range` holds a backslash: an escape.
    func hasEscape(_ start: Int, _ end: Int) -> Bool {
        guard let base = bytes.baseAddress, end > start else { return false }
        return memchr(base + start, Int32(UInt8(ascii: "\\")), end - start) != nil
    }

    /// Skips a string without escapes; returns where its content ends (before the closing quote).
    mutating func plainString() throws -> Int {
        try expect(UInt8(ascii: "\""))
        let end = try closingQuote(from: at)
        guard !hasEscape(at, end) else { throw RecordDecoder.Unsupported() }
        at = end + 1
        return end
    }

    /// Reads a string, unescaped.
    mutating func string() throws -> String {
        try expect(UInt8(ascii: "\""))
        let start = at
        let end = try closingQuote(from: start)
        at = end + 1
        if !hasEscape(start, end) {
            return String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<end]), as: UTF8.self)
        }
        // Escapes: leave them to Foundation's parser, on this string alone.
        let quoted = Data(UnsafeBufferPointer(rebasing: bytes[start - 1..<end + 1]))
        guard let text = try? JSONDecoder().decode(String.self, from: quoted) else { throw RecordDecoder.Unsupported() }
        return text
    }

    /// Skips a string (escapes and all); returns where it ends, after the closing quote.
    mutating func skipString() throws -> Int {
        at = try closingQuote(from: at + 1) + 1
        return at
    }
}

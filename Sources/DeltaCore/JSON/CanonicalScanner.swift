/// Recognises a snapshot record line, a canonical JSON object with a plain string `"id"` and no
/// `"hidden"` member, without building a JSON tree: the fast path of snapshot reads.
///
/// It only ever says yes for a line that `Record(parsing:)` accepts, as a visible record whose
/// canonical body is the line itself, with the same id. It says no (nil) for everything else,
/// including some rare lines that are fine (an id with escapes, a number it cannot check without
/// the full parser); callers then take the full parser, which also words the error.
struct CanonicalScanner {
    let bytes: UnsafeBufferPointer<UInt8>
    var index = 0
    private var depth = 0
    private var idRange: Range<Int>?
    let limits = JSONLimits.default

    /// A scanner of `bytes`, from their start.
    init(_ bytes: UnsafeBufferPointer<UInt8>) { self.bytes = bytes }

    /// The range of the id's bytes in `line` when it is a canonical visible record, nil otherwise.
    static func record(_ line: UnsafeBufferPointer<UInt8>) -> Range<Int>? {
        var scanner = CanonicalScanner(line)
        guard let id = scanner.record(), scanner.index == line.count else { return nil }
        return id
    }

    /// Scans a canonical visible record from `index` (the record object is level 1 of the depth
    /// limit, whatever encloses it, as for the parser): the range of its id's bytes, with
    /// `index` past the object; nil when it is not one.
    mutating func record() -> Range<Int>? {
        depth = 0
        idRange = nil
        guard index < bytes.count, bytes[index] == UInt8(ascii: "{"), object(top: true),
            let id = idRange, !id.isEmpty, id.count <= Record.maximumIDLength
        else { return nil }
        return id
    }

    private mutating func value() -> Bool {
        guard index < bytes.count else { return false }
        switch bytes[index] {
        case UInt8(ascii: "{"): return object(top: false)
        case UInt8(ascii: "["): return array()
        case UInt8(ascii: "\""): return string() != nil
        case UInt8(ascii: "t"): return literal("true")
        case UInt8(ascii: "f"): return literal("false")
        case UInt8(ascii: "n"): return literal("null")
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return number()
        default: return false
        }
    }

    private mutating func literal(_ text: StaticString) -> Bool {
        let count = text.utf8CodeUnitCount
        guard index + count <= bytes.count else { return false }
        for offset in 0..<count where bytes[index + offset] != text.utf8Start[offset] { return false }
        index += count
        return true
    }

    private mutating func object(top: Bool) -> Bool {
        depth += 1
        guard depth <= limits.maximumDepth else { return false }
        index += 1
        if index < bytes.count && bytes[index] == UInt8(ascii: "}") {
            index += 1
            depth -= 1
            return true
        }
        var previous: (range: Range<Int>, escaped: Bool)?
        while true {
            guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { return false }
            let start = index + 1
            guard let escaped = string() else { return false }
            let key = (range: start..<(index - 1), escaped: escaped)
            if let previous, !precedes(previous, key) { return false }
            previous = key
            guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { return false }
            index += 1
            if top && !escaped {
                if equals(key.range, "hidden") { return false }
                if equals(key.range, "id") {
                    let idStart = index + 1
                    guard index < bytes.count, bytes[index] == UInt8(ascii: "\""), string() == false else { return false }
                    idRange = idStart..<(index - 1)
                } else if !value() {
                    return false
                }
            } else if !value() {
                return false
            }
            guard index < bytes.count else { return false }
            let next = bytes[index]
            index += 1
            if next == UInt8(ascii: "}") { break }
            guard next == UInt8(ascii: ",") else { return false }
        }
        depth -= 1
        return true
    }

    private mutating func array() -> Bool {
        depth += 1
        guard depth <= limits.maximumDepth else { return false }
        index += 1
        if index < bytes.count && bytes[index] == UInt8(ascii: "]") {
            index += 1
            depth -= 1
            return true
        }
        while true {
            guard value(), index < bytes.count else { return false }
            let next = bytes[index]
            index += 1
            if next == UInt8(ascii: "]") { break }
            guard next == UInt8(ascii: ",") else { return false }
        }
        depth -= 1
        return true
    }

    private func equals(_ range: Range<Int>, _ text: StaticString) -> Bool {
        guard range.count == text.utf8CodeUnitCount else { return false }
        for offset in 0..<range.count where bytes[range.lowerBound + offset] != text.utf8Start[offset] { return false }
        return true
    }

    /// Whether key `a` sorts strictly before key `b` by their decoded UTF-8 bytes.
    private func precedes(_ a: (range: Range<Int>, escaped: Bool), _ b: (range: Range<Int>, escaped: Bool)) -> Bool {
        if !a.escaped && !b.escaped {
            return UnsafeBufferPointer(rebasing: bytes[a.range]).lexicographicallyPrecedes(UnsafeBufferPointer(rebasing: bytes[b.range]))
        }
        return decoded(a.range).lexicographicallyPrecedes(decoded(b.range))
    }
}

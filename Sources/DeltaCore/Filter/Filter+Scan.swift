extension Filter {
    /// The top-level members the filter reads, each once.
    public var members: [String] {
        var found: [String] = []
        func visit(_ filter: Filter) {
            switch filter {
            case .compare(let member, _, _), .oneOf(let member, _), .exists(let member, _), .has(let member, _):
                if !found.contains(where: { $0.utf8.elementsEqual(member.utf8) }) { found.append(member) }
            case .and(let filters), .or(let filters): filters.forEach(visit)
            case .not(let filter): visit(filter)
            }
        }
        visit(self)
        return found
    }

    /// Whether the record whose member `member` is `lookup(member)` (nil: missing) matches.
    func matches(lookup: (String) -> JSONValue?) -> Bool {
        switch self {
        case .compare(let member, let comparison, let value):
            guard let found = lookup(member) else { return false }
            let order = JSONOrder.compare(found, value)
            switch comparison {
            case .eq: return order == .equal
            case .ne: return order != .equal
            case .lt: return order == .less
            case .lte: return order == .less || order == .equal
            case .gt: return order == .greater
            case .gte: return order == .greater || order == .equal
            }
        case .oneOf(let member, let values):
            guard let found = lookup(member) else { return false }
            return values.contains { JSONOrder.compare(found, $0) == .equal }
        case .exists(let member, let present):
            return (lookup(member) != nil) == present
        case .has(let member, let value):
            guard case .array(let elements) = lookup(member) else { return false }
            return elements.contains { JSONOrder.compare($0, value) == .equal }
        case .and(let filters): return filters.allSatisfy { $0.matches(lookup: lookup) }
        case .or(let filters): return filters.contains { $0.matches(lookup: lookup) }
        case .not(let filter): return !filter.matches(lookup: lookup)
        }
    }
}

extension Filter {
    /// Whether the record whose member `member` has the JSON text `lookup(member)` (nil: missing)
    /// matches. A string compared for equality is compared as bytes when its text has no escape
    /// (the bytes are then the string's UTF-8, and strings compare by code points); anything
    /// else is parsed first. A value that does not parse sets `unreadable`.
    func matches(raw lookup: (String) -> UnsafeBufferPointer<UInt8>?, unreadable: inout Bool) -> Bool {
        func parsed(_ raw: UnsafeBufferPointer<UInt8>) -> JSONValue? {
            guard let value = try? JSONValue(parsing: raw) else {
                unreadable = true
                return nil
            }
            return value
        }
        switch self {
        case .compare(let member, let comparison, let value):
            guard let raw = lookup(member) else { return false }
            if comparison == .eq || comparison == .ne, case .string(let wanted) = value, let equal = Self.plainString(raw, equals: wanted) {
                return equal == (comparison == .eq)
            }
            guard let found = parsed(raw) else { return false }
            return matches { _ in found }
        case .oneOf(let member, let values):
            guard let raw = lookup(member) else { return false }
            var found: JSONValue?
            for value in values {
                if case .string(let wanted) = value, let equal = Self.plainString(raw, equals: wanted) {
                    if equal { return true }
                    continue
                }
                if found == nil { found = parsed(raw) }
                guard let found else { return false }
                if JSONOrder.compare(found, value) == .equal { return true }
            }
            return false
        case .exists(let member, let present):
            return (lookup(member) != nil) == present
        case .has(let member, _):
            guard let raw = lookup(member), let found = parsed(raw) else { return false }
            return matches { _ in found }
        case .and(let filters): return filters.allSatisfy { $0.matches(raw: lookup, unreadable: &unreadable) }
        case .or(let filters): return filters.contains { $0.matches(raw: lookup, unreadable: &unreadable) }
        case .not(let filter): return !filter.matches(raw: lookup, unreadable: &unreadable)
        }
    }

    /// Whether the JSON text `raw` is the string `wanted`: nil when it is a string with an escape
    /// (it must be parsed to tell); false when it is not a string at all.
    private static func plainString(_ raw: UnsafeBufferPointer<UInt8>, equals wanted: String) -> Bool? {
        guard raw.count >= 2, raw[0] == UInt8(ascii: "\""), raw[raw.count - 1] == UInt8(ascii: "\"") else { return false }
        let inner = UnsafeBufferPointer(rebasing: raw[1..<raw.count - 1])
        if inner.contains(UInt8(ascii: "\\")) { return nil }
        var wanted = wanted
        return wanted.withUTF8 { $0.elementsEqual(inner) }
    }
}

/// A filter ready to test many stored bodies: it reads only the members the filter names
/// (`MemberScanner`) and falls back to the full parser for a body it cannot walk; both give the
/// same answer (`FilterTests.scannerAgrees`). Bodies are canonical JSON, as every store keeps them.
public struct FilterMatcher: Sendable {
    /// The filter.
    public let filter: Filter
    private let names: [String]
    private let keys: [[UInt8]]

    /// Prepares `filter`.
    public init(_ filter: Filter) {
        self.filter = filter
        names = filter.members
        keys = names.map { name -> [UInt8] in
            var out: [UInt8] = []
            JSONValue.writeString(name, into: &out)
            return out
        }
    }

    /// Whether the record with canonical JSON `body` matches (one that does not parse matches nothing).
    public func matches(body: some Collection<UInt8>) -> Bool {
        let decided =
            body.withContiguousStorageIfAvailable { matches(buffer: $0) } ?? Array(body).withUnsafeBufferPointer { matches(buffer: $0) }
        if let decided { return decided }
        guard let value = try? JSONValue(parsing: body) else { return false }
        return filter.matches(value)
    }

    /// The scanner's answer; nil when it cannot walk the body or a value it needs does not parse.
    private func matches(buffer: UnsafeBufferPointer<UInt8>) -> Bool? {
        guard let found = MemberScanner.values(of: keys, in: buffer) else { return nil }
        var unreadable = false
        let answer = filter.matches(
            raw: { name in
                names.firstIndex { Self.same($0, name) }.flatMap { found[$0] }.map { UnsafeBufferPointer(rebasing: buffer[$0]) }
            }, unreadable: &unreadable)
        return unreadable ? nil : answer
    }

    /// Whether two member names are the same bytes (not merely canonically equivalent).
    private static func same(_ a: String, _ b: String) -> Bool {
        let fast: Bool?? = a.utf8.withContiguousStorageIfAvailable { a in b.utf8.withContiguousStorageIfAvailable { b in a.elementsEqual(b) } }
        return (fast ?? nil) ?? a.utf8.elementsEqual(b.utf8)
    }

    /// Whether the fast path walks `body` (for tests: the fallback would hide a scanner that gives up).
    func scans(_ body: [UInt8]) -> Bool { body.withUnsafeBufferPointer { matches(buffer: $0) } != nil }
}

/// Finds top-level members of a JSON object without building the whole tree: the filter's fast
/// path over stored bodies. It walks the object once, skipping every value it is not asked for,
/// and parses only the values it is, and stops once it has them all (stored bodies are canonical:
/// no key twice); nil when the bytes it walked are not a well-formed object of the shape it can
/// walk (the caller then takes the full parser).
enum MemberScanner {
    /// Where the values of `members` are in the object `bytes`, by the members' index (nil: absent).
    static func values(of members: [[UInt8]], in bytes: UnsafeBufferPointer<UInt8>) -> [Range<Int>?]? {
        var index = 0
        func skipSpace() {
            while index < bytes.count, bytes[index] == 0x20 || bytes[index] == 0x0A || bytes[index] == 0x0D || bytes[index] == 0x09 { index += 1 }
        }
        func skipString() -> Bool {
            guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { return false }
            index += 1
            while index < bytes.count {
                switch bytes[index] {
                case UInt8(ascii: "\\"): index += 2
                case UInt8(ascii: "\""):
                    index += 1
                    return true
                default: index += 1
                }
            }
            return false
        }
        func skipValue() -> Bool {
            var depth = 0
            repeat {
                skipSpace()
                guard index < bytes.count else { return false }
                switch bytes[index] {
                case UInt8(ascii: "\""): if !skipString() { return false }
                case UInt8(ascii: "{"), UInt8(ascii: "["):
                    depth += 1
                    index += 1
                case UInt8(ascii: "}"), UInt8(ascii: "]"):
                    depth -= 1
                    index += 1
                case UInt8(ascii: ","), UInt8(ascii: ":"):
                    guard depth > 0 else { return false }  // separators only inside an array or object
                    index += 1
                default:
                    while index < bytes.count, !",}]".utf8.contains(bytes[index]), bytes[index] != UInt8(ascii: "\"") { index += 1 }
                }
                if depth < 0 { return false }
            } while depth > 0
            return true
        }
        var found = [Range<Int>?](repeating: nil, count: members.count)
        var remaining = members.count
        skipSpace()
        guard index < bytes.count, bytes[index] == UInt8(ascii: "{") else { return nil }
        index += 1
        skipSpace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "}") { return found }
        while true {
            skipSpace()
            let keyStart = index
            guard skipString() else { return nil }
            let key = UnsafeBufferPointer(rebasing: bytes[keyStart..<index])
            skipSpace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { return nil }
            index += 1
            skipSpace()
            let valueStart = index
            guard skipValue() else { return nil }
            if let which = members.firstIndex(where: { member in member.withUnsafeBufferPointer { $0.elementsEqual(key) } }) {
                if found[which] == nil { remaining -= 1 }
                found[which] = valueStart..<index
                // A stored body is canonical (one of each key): the rest need not be walked.
                if remaining == 0 { return found }
            }
            skipSpace()
            guard index < bytes.count else { return nil }
            if bytes[index] == UInt8(ascii: "}") { return found }
            guard bytes[index] == UInt8(ascii: ",") else { return nil }
            index += 1
        }
    }
}

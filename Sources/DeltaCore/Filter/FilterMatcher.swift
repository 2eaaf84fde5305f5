/// A filter ready to test many stored bodies: it reads only the members the filter names
/// (`MemberScanner`) and falls back to the full parser for a body it cannot walk; both give the
/// same answer (`FilterTests.scannerAgrees`). Bodies are canonical JSON, as every store keeps them.
///
/// The filter is compiled once into `Node`s that name members by their place in the scan, so
/// testing a body allocates nothing when the scan decides it: a string compared for equality is
/// compared as bytes when the stored text has no escape (the bytes are then the string's UTF-8,
/// and strings compare by code points); anything else is parsed first.
public struct FilterMatcher: Sendable {
    /// The filter.
    public let filter: Filter
    private let keys: MemberScanner.Keys
    private let program: Node

    /// A compiled filter: `slot` is the member's index in `keys`; `plain` the UTF-8 of a string
    /// an `eq` or `ne` (or an `in`) compares with.
    private indirect enum Node: Sendable {
        case compare(slot: Int, Filter.Comparison, JSONValue, plain: [UInt8]?)
        case oneOf(slot: Int, [JSONValue], plains: [[UInt8]?])
        case exists(slot: Int, Bool)
        case has(slot: Int, JSONValue)
        case and([Node])
        case or([Node])
        case not(Node)
    }

    /// Prepares `filter`.
    public init(_ filter: Filter) {
        self.filter = filter
        let names = filter.members
        keys = MemberScanner.Keys(names)
        func slot(_ member: String) -> Int { names.firstIndex { $0.utf8.elementsEqual(member.utf8) } ?? 0 }
        func plain(_ value: JSONValue) -> [UInt8]? {
            guard case .string(let text) = value else { return nil }
            return Array(text.utf8)
        }
        func compile(_ filter: Filter) -> Node {
            switch filter {
            case .compare(let member, let comparison, let value):
                return .compare(slot: slot(member), comparison, value, plain: comparison == .eq || comparison == .ne ? plain(value) : nil)
            case .oneOf(let member, let values): return .oneOf(slot: slot(member), values, plains: values.map(plain))
            case .exists(let member, let present): return .exists(slot: slot(member), present)
            case .has(let member, let value): return .has(slot: slot(member), value)
            case .and(let filters): return .and(filters.map(compile))
            case .or(let filters): return .or(filters.map(compile))
            case .not(let filter): return .not(compile(filter))
            }
        }
        program = compile(filter)
    }

    /// Whether the record with canonical JSON `body` matches (one that does not parse matches nothing).
    public func matches(body: [UInt8]) -> Bool {
        if let decided = body.withUnsafeBufferPointer({ matches(buffer: $0) }) { return decided }
        return parsedMatches(body)
    }

    /// Whether the record whose canonical JSON is `bytes` matches, read in place.
    public func matches(bytes: UnsafeRawBufferPointer) -> Bool {
        let buffer = bytes.assumingMemoryBound(to: UInt8.self)
        if let decided = matches(buffer: buffer) { return decided }
        return parsedMatches(buffer)
    }

    /// Whether the record with canonical JSON `body` matches (one that does not parse matches nothing).
    public func matches(body: some Collection<UInt8>) -> Bool {
        if let decided = body.withContiguousStorageIfAvailable({ matches(buffer: $0) }) ?? Array(body).withUnsafeBufferPointer({ matches(buffer: $0) }) {
            return decided
        }
        return parsedMatches(body)
    }

    private func parsedMatches(_ body: some Collection<UInt8>) -> Bool {
        guard let value = try? JSONValue(parsing: body) else { return false }
        return filter.matches(value)
    }

    /// The scanner's answer; nil when it cannot walk the body or a value it needs does not parse.
    private func matches(buffer: UnsafeBufferPointer<UInt8>) -> Bool? {
        withUnsafeTemporaryAllocation(of: Range<Int>?.self, capacity: max(1, keys.count)) { found -> Bool? in
            guard MemberScanner.values(of: keys, in: buffer, into: found) else { return nil }
            var unreadable = false
            let answer = Self.evaluate(program, buffer, UnsafeBufferPointer(found), &unreadable)
            return unreadable ? nil : answer
        }
    }

    private static func evaluate(_ node: Node, _ buffer: UnsafeBufferPointer<UInt8>, _ found: UnsafeBufferPointer<Range<Int>?>, _ unreadable: inout Bool)
        -> Bool
    {
        func raw(_ slot: Int) -> UnsafeBufferPointer<UInt8>? { found[slot].map { UnsafeBufferPointer(rebasing: buffer[$0]) } }
        func parsed(_ raw: UnsafeBufferPointer<UInt8>) -> JSONValue? {
            guard let value = try? JSONValue(parsing: raw) else {
                unreadable = true
                return nil
            }
            return value
        }
        switch node {
        case .compare(let slot, let comparison, let value, let plain):
            guard let raw = raw(slot) else { return false }
            if let plain, let equal = plainString(raw, equals: plain) { return equal == (comparison == .eq) }
            guard let found = parsed(raw) else { return false }
            return Filter.compare(member: "", comparison, value).matches { _ in found }
        case .oneOf(let slot, let values, let plains):
            guard let raw = raw(slot) else { return false }
            var found: JSONValue?
            for (value, plain) in zip(values, plains) {
                if let plain, let equal = plainString(raw, equals: plain) {
                    if equal { return true }
                    continue
                }
                if found == nil { found = parsed(raw) }
                guard let found else { return false }
                if JSONOrder.compare(found, value) == .equal { return true }
            }
            return false
        case .exists(let slot, let present):
            return (found[slot] != nil) == present
        case .has(let slot, let value):
            guard let raw = raw(slot), let found = parsed(raw) else { return false }
            return Filter.has(member: "", value).matches { _ in found }
        case .and(let nodes): return nodes.allSatisfy { evaluate($0, buffer, found, &unreadable) }
        case .or(let nodes): return nodes.contains { evaluate($0, buffer, found, &unreadable) }
        case .not(let node): return !evaluate(node, buffer, found, &unreadable)
        }
    }

    /// Whether the JSON text `raw` is the string whose UTF-8 is `wanted`: nil when it is a string
    /// with an escape (it must be parsed to tell); false when it is not a string at all.
    private static func plainString(_ raw: UnsafeBufferPointer<UInt8>, equals wanted: [UInt8]) -> Bool? {
        guard raw.count >= 2, raw[0] == UInt8(ascii: "\""), raw[raw.count - 1] == UInt8(ascii: "\"") else { return false }
        let inner = UnsafeBufferPointer(rebasing: raw[1..<raw.count - 1])
        if inner.contains(UInt8(ascii: "\\")) { return nil }
        guard inner.count == wanted.count else { return false }
        return wanted.withUnsafeBufferPointer { wanted in
            for index in 0..<wanted.count where inner[index] != wanted[index] { return false }
            return true
        }
    }

    /// Whether the fast path walks `body` (for tests: the fallback would hide a scanner that gives up).
    func scans(_ body: [UInt8]) -> Bool { body.withUnsafeBufferPointer { matches(buffer: $0) } != nil }
}

/// Finds top-level members of a JSON object without building the whole tree: the filter's fast
/// path over stored bodies. It walks the object once, skipping every value it is not asked for,
/// and stops once it has them all (stored bodies are canonical: no key twice); it fails when the
/// bytes it walked are not a well-formed object of the shape it can walk (the caller then takes
/// the full parser). It allocates nothing.
enum MemberScanner {
    /// The members looked for, as their JSON-encoded names (quotes included) in one buffer.
    struct Keys: Sendable {
        private let bytes: [UInt8]
        private let ends: [Int]
        /// How many members.
        var count: Int { ends.count }

        /// The members `names`, in this order.
        init(_ names: [String]) {
            var bytes: [UInt8] = []
            var ends: [Int] = []
            for name in names {
                JSONValue.writeString(name, into: &bytes)
                ends.append(bytes.count)
            }
            self.bytes = bytes
            self.ends = ends
        }

        /// The index of the member whose encoded name is `key`, nil when none is.
        func index(of key: UnsafeBufferPointer<UInt8>) -> Int? {
            bytes.withUnsafeBufferPointer { bytes -> Int? in
                var start = 0
                for (index, end) in ends.enumerated() {
                    defer { start = end }
                    guard end - start == key.count else { continue }
                    var same = true
                    for offset in 0..<key.count where bytes[start + offset] != key[offset] {
                        same = false
                        break
                    }
                    if same { return index }
                }
                return nil
            }
        }
    }

    /// Writes where the values of `keys` are in the object `bytes` into `found`, by the members'
    /// index (nil: absent); false when the object cannot be walked.
    static func values(of keys: Keys, in bytes: UnsafeBufferPointer<UInt8>, into found: UnsafeMutableBufferPointer<Range<Int>?>) -> Bool {
        for slot in 0..<keys.count { found[slot] = nil }
        var walker = Walker(bytes: bytes)
        var remaining = keys.count
        walker.skipSpace()
        guard walker.next(is: UInt8(ascii: "{")) else { return false }
        walker.skipSpace()
        if walker.next(is: UInt8(ascii: "}")) { return true }
        while true {
            walker.skipSpace()
            let keyStart = walker.index
            guard walker.skipString() else { return false }
            let key = UnsafeBufferPointer(rebasing: bytes[keyStart..<walker.index])
            walker.skipSpace()
            guard walker.next(is: UInt8(ascii: ":")) else { return false }
            walker.skipSpace()
            let valueStart = walker.index
            guard walker.skipValue() else { return false }
            if let which = keys.index(of: key) {
                if found[which] == nil { remaining -= 1 }
                found[which] = valueStart..<walker.index
                // A stored body is canonical (one of each key): the rest need not be walked.
                if remaining == 0 { return true }
            }
            walker.skipSpace()
            if walker.next(is: UInt8(ascii: "}")) { return true }
            guard walker.next(is: UInt8(ascii: ",")) else { return false }
        }
    }

    /// A position in the bytes being walked.
    private struct Walker {
        let bytes: UnsafeBufferPointer<UInt8>
        var index = 0

        /// Steps over `byte` when it is next; false otherwise.
        mutating func next(is byte: UInt8) -> Bool {
            guard index < bytes.count, bytes[index] == byte else { return false }
            index += 1
            return true
        }

        mutating func skipSpace() {
            while index < bytes.count {
                switch bytes[index] {
                case 0x20, 0x0A, 0x0D, 0x09: index += 1
                default: return
                }
            }
        }

        /// Steps over the string that starts here; false when none does or it does not end.
        /// Eight bytes at a time up to the first quote or backslash (the lowest of the marked bytes
        /// is exact: a borrow only carries upward), then byte by byte.
        mutating func skipString() -> Bool {
            guard next(is: UInt8(ascii: "\"")) else { return false }
            let ones: UInt64 = 0x0101_0101_0101_0101
            let highs: UInt64 = 0x8080_8080_8080_8080
            if let base = bytes.baseAddress {
                while index + 8 <= bytes.count {
                    let word = UnsafeRawPointer(base + index).loadUnaligned(as: UInt64.self).littleEndian
                    let quote = word ^ (ones &* UInt64(UInt8(ascii: "\"")))
                    let backslash = word ^ (ones &* UInt64(UInt8(ascii: "\\")))
                    let marked = ((quote &- ones) & ~quote | (backslash &- ones) & ~backslash) & highs
                    if marked != 0 {
                        index += marked.trailingZeroBitCount / 8
                        break
                    }
                    index += 8
                }
            }
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

        /// Steps over the value that starts here (nested arrays and objects by their brackets).
        mutating func skipValue() -> Bool {
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
                    scalar: while index < bytes.count {
                        switch bytes[index] {
                        case UInt8(ascii: ","), UInt8(ascii: "}"), UInt8(ascii: "]"), UInt8(ascii: "\""): break scalar
                        default: index += 1
                        }
                    }
                }
                if depth < 0 { return false }
            } while depth > 0
            return true
        }
    }
}

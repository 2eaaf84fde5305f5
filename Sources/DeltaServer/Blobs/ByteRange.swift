/// A `Range` header (RFC 9110, section 14.2) against a representation of `size` bytes: one
/// range of bytes, or none. Several ranges, and a header that does not parse, are ignored (the
/// whole representation is sent, as the RFC allows); a range that starts past the end is
/// unsatisfiable (`416`).
enum ByteRange: Equatable {
    /// Send the whole representation (`200`).
    case whole
    /// Send these bytes (`206`, `Content-Range: bytes first-last/size`).
    case part(Range<Int64>)
    /// Send `416` with `Content-Range: bytes */size`.
    case unsatisfiable

    /// The range `header` asks for of `size` bytes.
    init(header: String?, size: Int64) {
        guard let header, header.hasPrefix("bytes=") else {
            self = .whole
            return
        }
        let spec = String(header.dropFirst("bytes=".count)).trimmingWhitespace
        let sides = spec.split(separator: "-", maxSplits: 1, omittingEmptySubsequences: false)
        guard !spec.contains(","), sides.count == 2, sides.allSatisfy({ $0.allSatisfy(\.isASCII) && $0.allSatisfy(\.isNumber) }) else {
            self = .whole
            return
        }
        switch (Int64(sides[0]), Int64(sides[1])) {
        case (nil, let suffix?) where sides[0].isEmpty:
            // The last `suffix` bytes; all of them when longer; none is unsatisfiable.
            self = suffix == 0 || size == 0 ? .unsatisfiable : .part(max(size - suffix, 0)..<size)
        case (let first?, nil) where sides[1].isEmpty:
            self = first < size ? .part(first..<size) : .unsatisfiable
        case (let first?, let last?) where first <= last:
            self = first < size ? .part(first..<min(last, size - 1) + 1) : .unsatisfiable
        default:
            // A last before the first, or a number too long to be one: invalid, so ignored.
            self = .whole
        }
    }
}

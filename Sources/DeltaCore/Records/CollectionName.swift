/// A validated collection name: 1 to 64 characters from `[A-Za-z0-9_-]`.
///
/// The character set keeps names safe in URLs, JSON keys, SQL (they are still always bound
/// as parameters) and file names without any escaping.
public struct CollectionName: Hashable, Sendable, Comparable, CustomStringConvertible {
    /// The longest name accepted, in characters.
    public static let maximumLength = 64

    /// The name as given.
    public let rawValue: String

    /// Validates `rawValue`, throwing `WireError.collectionName` when it does not fit.
    public init(_ rawValue: String) throws {
        let bytes = Array(rawValue.utf8)
        guard !bytes.isEmpty else {
            throw WireError(.collectionName, "must not be empty")
        }
        guard bytes.count <= Self.maximumLength else {
            throw WireError(.collectionName, "longer than \(Self.maximumLength) characters", evidence: "\(bytes.count) bytes")
        }
        for byte in bytes where !Self.isAllowed(byte) {
            throw WireError(
                .collectionName, "only A-Z, a-z, 0-9, '_' and '-' are allowed",
                evidence: String(reflecting: String(rawValue.prefix(80))))
        }
        self.rawValue = rawValue
    }

    /// The name as given.
    public var description: String { rawValue }

    /// Orders names by their bytes, which is the order snapshots list them in.
    public static func < (lhs: Self, rhs: Self) -> Bool { lhs.rawValue.utf8.lexicographicallyPrecedes(rhs.rawValue.utf8) }

    private static func isAllowed(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "_"), UInt8(ascii: "-"):
            return true
        default:
            return false
        }
    }
}

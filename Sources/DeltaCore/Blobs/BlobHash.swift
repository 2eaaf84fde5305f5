public import Foundation

/// A blob's name: the SHA-256 of its bytes, as 64 lowercase hexadecimal digits.
///
/// Blobs are content-addressed: the same bytes always have the same name, so an upload is
/// idempotent, a download can be checked against its name, and a cache may keep it forever.
public struct BlobHash: Sendable, Hashable, Comparable, CustomStringConvertible {
    /// The 64 lowercase hexadecimal digits.
    public let hex: String

    /// Checks `text` is 64 lowercase hexadecimal digits; anything else (upper case, other
    /// lengths, a path) is refused, so a hash is always safe to use as a file name.
    public init(_ text: some StringProtocol) throws {
        let bytes = Array(text.utf8)
        guard bytes.count == 64, bytes.allSatisfy({ (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }) else {
            throw WireError(.blob, "a blob's hash must be 64 lowercase hexadecimal digits (its SHA-256)", evidence: String(reflecting: String(text.prefix(80))))
        }
        hex = String(decoding: bytes, as: UTF8.self)
    }

    /// The hash of a finished digest (32 bytes).
    public init(digest: [UInt8]) {
        precondition(digest.count == 32, "a SHA-256 digest has 32 bytes")
        hex = digest.map { byte in
            let digits = Array("0123456789abcdef".utf8)
            return String(decoding: [digits[Int(byte >> 4)], digits[Int(byte & 0x0F)]], as: UTF8.self)
        }.joined()
    }

    /// The hash of `bytes`.
    public static func of(_ bytes: some ContiguousBytes) -> BlobHash {
        BlobHash(digest: SHA256.hash(bytes))
    }

    /// The hex digits.
    public var description: String { hex }

    /// Orders by the hex digits.
    public static func < (lhs: BlobHash, rhs: BlobHash) -> Bool { lhs.hex < rhs.hex }
}

import CSHAExtensions
import Crypto
public import Foundation

/// The state digest of a collection (or of a selection of it): the sum, modulo 2^256, of the
/// SHA-256 of the canonical body of every visible record, each read as a 256-bit big-endian
/// unsigned integer (docs/PROTOCOL.md, "State digest").
///
/// A sum, so it does not depend on the order records are met in and is kept incrementally: a
/// write adds the new version's hash and subtracts the old one's, so neither the server nor the
/// replica rescans a collection to know it. Hidden records are not part of the visible state:
/// hiding a record subtracts its hash. The empty collection's digest is 0.
///
/// It detects accidents: a changed value, a dropped or extra record, a record from another
/// token, a local store changed behind the replica's back. It is not a signature: someone who can
/// choose many records could make two states with one sum.
public struct StateDigest: Hashable, Sendable, CustomStringConvertible {
    /// The 256-bit value, most significant 64-bit word first.
    private var words: (UInt64, UInt64, UInt64, UInt64)

    /// The digest of an empty collection.
    public static let empty = StateDigest(words: (0, 0, 0, 0))

    private init(words: (UInt64, UInt64, UInt64, UInt64)) { self.words = words }

    /// Reads 32 big-endian bytes (a SHA-256 value, or a digest's `bytes`); nil for another length.
    public init?(bytes: some Collection<UInt8>) {
        guard bytes.count == 32 else { return nil }
        var parts: [UInt64] = [0, 0, 0, 0]
        for (index, byte) in bytes.enumerated() { parts[index / 8] = parts[index / 8] << 8 | UInt64(byte) }
        words = (parts[0], parts[1], parts[2], parts[3])
    }

    /// Reads the 64 lowercase hex digits of `hex`; nil for anything else.
    public init?(hex text: some StringProtocol) {
        let digits = Array(text.utf8)
        guard digits.count == 64 else { return nil }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(32)
        for index in stride(from: 0, to: 64, by: 2) {
            guard let high = Self.nibble(digits[index]), let low = Self.nibble(digits[index + 1]) else { return nil }
            bytes.append(high << 4 | low)
        }
        self.init(bytes: bytes)
    }

    /// The digest of the records whose canonical bodies are `bodies`.
    public init(bodies: some Sequence<[UInt8]>) {
        self = .empty
        for body in bodies { add(body: body) }
    }

    /// The 32 big-endian bytes of the value.
    public var bytes: [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(32)
        for word in [words.0, words.1, words.2, words.3] {
            for shift in stride(from: 56, through: 0, by: -8) { out.append(UInt8(truncatingIfNeeded: word >> UInt64(shift))) }
        }
        return out
    }

    /// The 64 lowercase hex digits of the value: how it travels in `Delta-Digest`.
    public var hex: String {
        let digits = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(64)
        for byte in bytes {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 0x0F)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// The hex value, for logs and errors.
    public var description: String { hex }

    /// Adds a visible record, from its canonical body.
    public mutating func add(body: some ContiguousBytes) {
        add(Self.element(body))
    }

    /// Subtracts a record that is no longer visible (or whose old version is replaced).
    public mutating func remove(body: some ContiguousBytes) {
        add(Self.element(body).negated)
    }

    /// Adds another digest (of records disjoint from this one's).
    public mutating func add(_ other: StateDigest) {
        var carry = false
        (words.3, carry) = Self.sum(words.3, other.words.3, carry)
        (words.2, carry) = Self.sum(words.2, other.words.2, carry)
        (words.1, carry) = Self.sum(words.1, other.words.1, carry)
        (words.0, _) = Self.sum(words.0, other.words.0, carry)
    }

    /// Subtracts another digest (of records this one's includes).
    public mutating func subtract(_ other: StateDigest) {
        add(other.negated)
    }

    /// The additive inverse modulo 2^256.
    public var negated: StateDigest {
        var inverted = StateDigest(words: (~words.0, ~words.1, ~words.2, ~words.3))
        inverted.add(StateDigest(words: (0, 0, 0, 1)))
        return inverted
    }

    /// One record's contribution: SHA-256 of its canonical body, hashed without allocating (a
    /// million records are hashed per snapshot read): with the CPU's SHA instructions where it
    /// has them (1.7 times as fast as swift-crypto on 200-byte records), by swift-crypto elsewhere.
    public static func element(_ body: some ContiguousBytes) -> StateDigest { element(body, implementation: .fastest) }

    /// `element(_:)` computed by `implementation` (`.portable` and `.library` for tests and comparisons).
    public static func element(_ body: some ContiguousBytes, implementation: SHA256.Implementation) -> StateDigest {
        body.withUnsafeBytes { raw in
            if implementation == .portable { return StateDigest(bytes: SHA256.hash(raw, implementation: .portable))! }
            guard SHA256.hardwareAvailable && implementation == .fastest else {
                // swift-crypto, read as four big-endian words without allocating.
                return Crypto.SHA256.hash(data: raw).withUnsafeBytes { digest in
                    StateDigest(
                        words: (
                            UInt64(bigEndian: digest.loadUnaligned(fromByteOffset: 0, as: UInt64.self)),
                            UInt64(bigEndian: digest.loadUnaligned(fromByteOffset: 8, as: UInt64.self)),
                            UInt64(bigEndian: digest.loadUnaligned(fromByteOffset: 16, as: UInt64.self)),
                            UInt64(bigEndian: digest.loadUnaligned(fromByteOffset: 24, as: UInt64.self))
                        ))
                }
            }
            var out: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)
            withUnsafeMutableBytes(of: &out) { digest in
                deltasnap_sha256_oneshot(
                    raw.baseAddress?.assumingMemoryBound(to: UInt8.self) ?? Self.nothing, raw.count, digest.baseAddress!.assumingMemoryBound(to: UInt8.self))
            }
            // The bytes are big-endian: each word read from memory is byte-swapped on little-endian CPUs.
            return StateDigest(words: (UInt64(bigEndian: out.0), UInt64(bigEndian: out.1), UInt64(bigEndian: out.2), UInt64(bigEndian: out.3)))
        }
    }

    /// Where an empty body's bytes "are": never read (its length is 0).
    nonisolated(unsafe) private static let nothing = UnsafePointer<UInt8>(bitPattern: 1)!

    /// Compares two digests without exiting early (they guard the same data either way; this keeps
    /// timing out of the picture).
    public static func == (lhs: StateDigest, rhs: StateDigest) -> Bool {
        (lhs.words.0 ^ rhs.words.0) | (lhs.words.1 ^ rhs.words.1) | (lhs.words.2 ^ rhs.words.2) | (lhs.words.3 ^ rhs.words.3) == 0
    }

    /// Hashes the value.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(words.0)
        hasher.combine(words.1)
        hasher.combine(words.2)
        hasher.combine(words.3)
    }

    private static func sum(_ a: UInt64, _ b: UInt64, _ carry: Bool) -> (UInt64, Bool) {
        let (partial, first) = a.addingReportingOverflow(b)
        let (total, second) = partial.addingReportingOverflow(carry ? 1 : 0)
        return (total, first || second)
    }

    private static func nibble(_ digit: UInt8) -> UInt8? {
        switch digit {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): digit - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): digit - UInt8(ascii: "a") + 10
        default: nil
        }
    }
}

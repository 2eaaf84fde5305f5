import CSHAExtensions
import Crypto
import Foundation

/// SHA-256 (FIPS 180-4), incremental: snapshots checksum their content with it, and the server
/// compares secrets through it. Kept here so the client needs nothing beyond Foundation, SQLite and zlib.
///
/// Blocks are compressed with the CPU's SHA instructions where it has them (x86 SHA-NI, through
/// the `CSHAExtensions` C target), and by swift-crypto elsewhere (CryptoKit on Apple platforms,
/// with the ARM SHA instructions; BoringSSL on Linux): 5 to 7 times the portable Swift code,
/// which stays for tests and comparisons (docs/BENCHMARKS.md, "The client API").
public struct SHA256: Sendable {
    /// How blocks are compressed.
    public enum Implementation: Sendable {
        /// The CPU's SHA instructions when it has them, swift-crypto otherwise.
        case fastest
        /// The portable Swift code, whatever the CPU (for tests and comparisons).
        case portable
        /// swift-crypto's `SHA256`, whatever the CPU.
        case library
    }

    /// Whether this CPU has the SHA instructions `Implementation.fastest` uses.
    public static let hardwareAvailable = deltasnap_sha256_hardware_available() == 1

    private var state: [UInt32] = [
        0x6a09_e667, 0xbb67_ae85, 0x3c6e_f372, 0xa54f_f53a, 0x510e_527f, 0x9b05_688c, 0x1f83_d9ab, 0x5be0_cd19,
    ]
    private var pending: [UInt8] = []
    private var length: UInt64 = 0
    private let hardware: Bool
    /// swift-crypto's hasher, when it does the work.
    private var library: Crypto.SHA256?

    /// The round constants, from the C target so that both implementations read one table
    /// (a `const` C array: never written, so sharing it across threads is safe).
    nonisolated(unsafe) private static let k = UnsafeBufferPointer(start: deltasnap_sha256_constants(), count: 64)

    /// A fresh hash.
    public init(implementation: Implementation = .fastest) {
        hardware = implementation == .fastest && SHA256.hardwareAvailable
        if implementation == .library || (implementation == .fastest && !hardware) { library = Crypto.SHA256() }
    }

    /// Hashes more bytes.
    public mutating func update(_ bytes: some ContiguousBytes) {
        bytes.withUnsafeBytes { raw in update(raw) }
    }

    /// Hashes more bytes.
    public mutating func update(_ raw: UnsafeRawBufferPointer) {
        if library != nil {
            library!.update(bufferPointer: raw)
            return
        }
        length &+= UInt64(raw.count)
        var input = raw[...]
        if !pending.isEmpty {
            let take = min(64 - pending.count, input.count)
            pending.append(contentsOf: input.prefix(take))
            input = input.dropFirst(take)
            if pending.count == 64 {
                let block = pending
                block.withUnsafeBytes { compress(blocks: $0) }
                pending.removeAll(keepingCapacity: true)
            }
        }
        let whole = input.count / 64 * 64
        if whole > 0 {
            compress(blocks: UnsafeRawBufferPointer(rebasing: input.prefix(whole)))
            input = input.dropFirst(whole)
        }
        pending.append(contentsOf: input)
    }

    /// The 32-byte digest of everything hashed so far.
    public func finalize() -> [UInt8] {
        if let library { return Array(library.finalize()) }
        var copy = self
        let bits = length &* 8
        var tail: [UInt8] = [0x80]
        tail.append(contentsOf: repeatElement(0, count: (119 - (Int(length % 64))) % 64))
        for shift in stride(from: 56, through: 0, by: -8) { tail.append(UInt8(truncatingIfNeeded: bits >> UInt64(shift))) }
        copy.update(tail)
        precondition(copy.pending.isEmpty, "SHA256 padding")
        var digest: [UInt8] = []
        digest.reserveCapacity(32)
        for word in copy.state {
            digest.append(contentsOf: [UInt8(word >> 24), UInt8(word >> 16 & 0xFF), UInt8(word >> 8 & 0xFF), UInt8(word & 0xFF)])
        }
        return digest
    }

    /// 16 lowercase hex digits: the first 8 bytes of SHA-256 over `bytes`. What names a selection,
    /// a rules file and a user's binding in tokens: short, and equal only for equal inputs in practice.
    public static func shortHex(_ bytes: some ContiguousBytes) -> String {
        hash(bytes).prefix(8).map { byte in
            let text = String(byte, radix: 16)
            return byte < 16 ? "0" + text : text
        }.joined()
    }

    /// The digest as 64 lowercase hex characters.
    public func hexDigest() -> String {
        finalize().map { byte in
            let text = String(byte, radix: 16)
            return byte < 16 ? "0" + text : text
        }.joined()
    }

    /// The digest of `bytes`.
    public static func hash(_ bytes: some ContiguousBytes, implementation: Implementation = .fastest) -> [UInt8] {
        var hasher = SHA256(implementation: implementation)
        hasher.update(bytes)
        return hasher.finalize()
    }

    /// Compresses whole 64-byte blocks into the state.
    private mutating func compress(blocks: UnsafeRawBufferPointer) {
        if hardware {
            state.withUnsafeMutableBufferPointer { state in
                deltasnap_sha256_blocks(state.baseAddress!, blocks.baseAddress!.assumingMemoryBound(to: UInt8.self), blocks.count / 64)
            }
        } else {
            for start in stride(from: 0, to: blocks.count, by: 64) {
                compress(block: UnsafeRawBufferPointer(rebasing: blocks[start..<start + 64]))
            }
        }
    }

    /// The portable compression of one 64-byte block.
    private mutating func compress(block: UnsafeRawBufferPointer) {
        withUnsafeTemporaryAllocation(of: UInt32.self, capacity: 64) { w in
            for i in 0..<16 {
                w[i] = UInt32(block[i * 4]) << 24 | UInt32(block[i * 4 + 1]) << 16 | UInt32(block[i * 4 + 2]) << 8 | UInt32(block[i * 4 + 3])
            }
            for i in 16..<64 {
                let s0 = rotate(w[i - 15], 7) ^ rotate(w[i - 15], 18) ^ (w[i - 15] >> 3)
                let s1 = rotate(w[i - 2], 17) ^ rotate(w[i - 2], 19) ^ (w[i - 2] >> 10)
                w[i] = w[i - 16] &+ s0 &+ w[i - 7] &+ s1
            }
            var a = state[0]
            var b = state[1]
            var c = state[2]
            var d = state[3]
            var e = state[4]
            var f = state[5]
            var g = state[6]
            var h = state[7]
            let k = SHA256.k
            for i in 0..<64 {
                let s1 = rotate(e, 6) ^ rotate(e, 11) ^ rotate(e, 25)
                let choice = (e & f) ^ (~e & g)
                let t1 = h &+ s1 &+ choice &+ k[i] &+ w[i]
                let s0 = rotate(a, 2) ^ rotate(a, 13) ^ rotate(a, 22)
                let majority = (a & b) ^ (a & c) ^ (b & c)
                let t2 = s0 &+ majority
                h = g
                g = f
                f = e
                e = d &+ t1
                d = c
                c = b
                b = a
                a = t1 &+ t2
            }
            state[0] &+= a
            state[1] &+= b
            state[2] &+= c
            state[3] &+= d
            state[4] &+= e
            state[5] &+= f
            state[6] &+= g
            state[7] &+= h
        }
    }

    private func rotate(_ value: UInt32, _ count: UInt32) -> UInt32 { value >> count | value << (32 - count) }
}

/// Compares two secrets in time that depends only on their hashes' fixed length, not on where they differ.
public func constantTimeEqual(_ lhs: some ContiguousBytes, _ rhs: some ContiguousBytes) -> Bool {
    let left = SHA256.hash(lhs)
    let right = SHA256.hash(rhs)
    var difference: UInt8 = 0
    for index in 0..<32 { difference |= left[index] ^ right[index] }
    return difference == 0
}

import Foundation

/// SplitMix64: a small, seedable generator, so randomized tests can be replayed from their seed.
public struct SeededGenerator: RandomNumberGenerator, Sendable {
    private var state: UInt64

    /// A generator that always produces the same sequence for `seed`.
    public init(seed: UInt64) { state = seed }

    /// The next 64 random bits.
    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

extension SeededGenerator {
    /// `count` random bytes, eight from each `next()`: megabytes in a debug build take a
    /// fraction of a second, where a closure per byte held a cooperative thread for seconds
    /// (and, on a two-core machine, stalled every other test's server with it).
    public mutating func bytes(_ count: Int) -> [UInt8] {
        var words = [UInt64](repeating: 0, count: (count + 7) / 8)
        for index in words.indices { words[index] = next() }
        return words.withUnsafeBytes { Array($0.prefix(count)) }
    }
}

extension SeededGenerator {
    /// The seed of a randomized test: `DELTASNAP_SEED` when set (a replay), else a random one;
    /// printed with the way to replay it, so that a failure can be run again.
    public static func seed(for test: String) -> UInt64 {
        let seed = ProcessInfo.processInfo.environment["DELTASNAP_SEED"].flatMap { UInt64($0) } ?? UInt64.random(in: 1...UInt64(Int32.max))
        print("\(test): seed \(seed) (replay with DELTASNAP_SEED=\(seed))")
        return seed
    }
}

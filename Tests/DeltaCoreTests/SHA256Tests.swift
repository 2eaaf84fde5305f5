import DeltaCore
import DeltaTestSupport
import Foundation
import Testing

@Suite("SHA-256: the CPU's SHA instructions, swift-crypto and the portable code agree")
struct SHA256Tests {
    /// Hex of `bytes` hashed in pieces whose sizes come from `random`.
    private func digest(_ bytes: [UInt8], _ implementation: SHA256.Implementation, pieces random: inout SeededGenerator) -> String {
        var hasher = SHA256(implementation: implementation)
        var start = 0
        while start < bytes.count {
            let size = Int(random.next() % 200)
            let end = min(bytes.count, start + size)
            bytes[start..<end].withUnsafeBytes { hasher.update($0) }
            start = end
        }
        return hasher.hexDigest()
    }

    @Test("every length from 0 to 520 bytes and a few large ones, fed in random pieces, gives the same digest all three ways")
    func implementationsAgree() {
        let seed = SeededGenerator.seed(for: "SHA256Tests.implementationsAgree")
        var random = SeededGenerator(seed: seed)
        for length in Array(0...520) + [4_095, 65_536, 1_000_003] {
            let bytes = (0..<length).map { _ in UInt8(truncatingIfNeeded: random.next()) }
            let fastest = digest(bytes, .fastest, pieces: &random)
            let portable = digest(bytes, .portable, pieces: &random)
            let library = digest(bytes, .library, pieces: &random)
            #expect(fastest == portable, "length \(length), seed \(seed) (hardware: \(SHA256.hardwareAvailable))")
            #expect(library == portable, "length \(length), seed \(seed): swift-crypto")
            if fastest != portable || library != portable { return }
        }
    }

    @Test("a random megabyte hashes to what coreutils' sha256sum prints, both ways")
    func matchesSha256sum() async throws {
        let seed = SeededGenerator.seed(for: "SHA256Tests.matchesSha256sum")
        var random = SeededGenerator(seed: seed)
        let bytes = (0..<(1 << 20) + Int(random.next() % 4096)).map { _ in UInt8(truncatingIfNeeded: random.next()) }
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("sha256-\(seed)")
        try Data(bytes).write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        let (status, printed) = try await runProgram(try requireProgram("sha256sum", package: "coreutils"), [file.path])
        #expect(status == 0, "\(printed)")
        let expected = String(printed.prefix(64))
        #expect(digest(bytes, .fastest, pieces: &random) == expected, "seed \(seed)")
        #expect(digest(bytes, .portable, pieces: &random) == expected, "seed \(seed)")
    }
}

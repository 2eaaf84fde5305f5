import DeltaCore
import DeltaTestSupport
import Foundation
import Testing

@Suite("State digest")
struct StateDigestTests {
    static let a = Array(#"{"id":"a","n":1}"#.utf8)
    static let b = Array(#"{"id":"b","n":2}"#.utf8)
    static let b3 = Array(#"{"id":"b","n":3}"#.utf8)

    @Test("the worked example of docs/PROTOCOL.md: each record's SHA-256 as a 256-bit number, summed modulo 2^256 (this sum wraps)")
    func workedExample() {
        #expect(StateDigest.empty.hex == String(repeating: "0", count: 64))
        #expect(StateDigest.element(Self.a).hex == "ebddcace15c56ac9ac7a5499fffba4dece33724d7e2ad7ff5bdd262a10e643ef")
        #expect(StateDigest.element(Self.b).hex == "b62e0fa2051238982f5df0b30c51e0a72e7363bd6dca713c0dd7a45a32782310")
        var digest = StateDigest(bodies: [Self.a, Self.b])
        #expect(digest.hex == "a20bda701ad7a361dbd8454d0c4d8585fca6d60aebf5493b69b4ca84435e66ff")
        // b changes to n = 3: out with the old version, in with the new.
        digest.remove(body: Self.b)
        digest.add(body: Self.b3)
        #expect(digest.hex == "f8b55f4d546fe0c15bd5360c1660449af838e236702dca5df15b9b5031a592e9")
        // b is hidden: only a is left.
        digest.remove(body: Self.b3)
        #expect(digest == StateDigest(bodies: [Self.a]))
        digest.remove(body: Self.a)
        #expect(digest == .empty)
    }

    @Test("order does not matter, removing undoes adding, and hex and bytes read back exactly (randomized)")
    func algebra() {
        let seed = SeededGenerator.seed(for: "StateDigestTests.algebra")
        var random = SeededGenerator(seed: seed)
        let bodies = (0..<200).map { index in Array(#"{"id":"r\#(index)","v":\#(random.next() % 1000)}"#.utf8) }
        let forward = StateDigest(bodies: bodies)
        var shuffled = bodies
        for index in shuffled.indices.reversed() { shuffled.swapAt(index, Int(random.next() % UInt64(index + 1))) }
        #expect(StateDigest(bodies: shuffled) == forward, "seed \(seed)")
        var partial = forward
        for body in shuffled.prefix(120) { partial.remove(body: body) }
        #expect(partial == StateDigest(bodies: shuffled.dropFirst(120)), "seed \(seed)")
        var sum = StateDigest(bodies: shuffled.prefix(50))
        sum.add(StateDigest(bodies: shuffled.dropFirst(50)))
        #expect(sum == forward, "seed \(seed)")
        sum.subtract(StateDigest(bodies: shuffled.dropFirst(50)))
        #expect(sum == StateDigest(bodies: shuffled.prefix(50)), "seed \(seed)")
        #expect(StateDigest(hex: forward.hex) == forward)
        #expect(StateDigest(bytes: forward.bytes) == forward)
        #expect(forward.negated.negated == forward)
        var zero = forward
        zero.add(forward.negated)
        #expect(zero == .empty)
    }

    @Test("a record's contribution is its SHA-256 whatever its length (the one-shot hardware path pads like the streaming hash)")
    func elementMatchesStreamingHash() {
        for length in 0...300 {
            let body = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }
            var portable = SHA256(implementation: .portable)
            portable.update(body)
            #expect(StateDigest.element(body).bytes == portable.finalize(), "length \(length)")
            #expect(StateDigest.element(body, implementation: .library).bytes == portable.finalize(), "length \(length): swift-crypto")
        }
    }

    @Test("only 64 lowercase hex digits or 32 bytes are a digest")
    func parsing() {
        let good = String(repeating: "0f", count: 32)
        #expect(StateDigest(hex: good) != nil)
        for bad in [good.uppercased(), String(good.dropLast()), good + "0", String(repeating: "g", count: 64), ""] {
            #expect(StateDigest(hex: bad) == nil, "\(bad)")
        }
        #expect(StateDigest(bytes: [UInt8](repeating: 0, count: 31)) == nil)
        #expect(StateDigest(bytes: [UInt8](repeating: 0xFF, count: 32))?.hex == String(repeating: "f", count: 64))
    }
}

import DeltaAuthoring
import DeltaCore
import DeltaTestSupport
import Foundation
import Testing

@Suite("gzip streams and SHA-256")
struct GzipTests {
    @Test("Streaming compression round-trips and is byte-reproducible")
    func roundTrip() throws {
        var generator = SeededGenerator(seed: 3)
        let input = (0..<200_000).map { _ in UInt8(truncatingIfNeeded: generator.next() % 16 + 65) }
        let compressor = try GzipCompressor()
        var streamed: [UInt8] = []
        var offset = 0
        while offset < input.count {
            compressor.compress(Array(input[offset..<min(input.count, offset + 7_919)]), into: &streamed)
            offset += 7_919
        }
        compressor.finish(into: &streamed)
        #expect(streamed == (try gzip(input)))
        #expect(try gunzip(streamed) == input)
        // Fixed header: magic, deflate, no flags, mtime 0, xfl, OS 255.
        #expect(Array(streamed.prefix(10)) == [0x1F, 0x8B, 8, 0, 0, 0, 0, 0, 0, 255])
    }

    @Test("Corrupt and truncated streams are refused")
    func corrupt() throws {
        let good = try gzip(Array("hello hello hello".utf8))
        #expect(throws: WireError.self) { try gunzip(Array(good.dropLast(3))) }
        var flipped = good
        flipped[flipped.count - 6] ^= 0xFF  // inside the CRC-32
        #expect(throws: WireError.self) { try gunzip(flipped) }
        #expect(throws: WireError.self) { try gunzip(good + [0x00]) }
    }

    @Test("A small compressed piece that inflates to 16 MB comes out whole, in pieces no larger than asked")
    func largeExpansion() throws {
        let plain = [UInt8](repeating: 0, count: 16 << 20)
        let compressed = try gzip(plain)
        #expect(compressed.count < 100_000)
        #expect(try gunzip(compressed) == plain)
        for pieceSize in [1 << 16, 1 << 18, 12_345] {
            let inflater = try Inflater(pieceSize: pieceSize)
            var out: [UInt8] = []
            try inflater.decompress(compressed) { piece in
                #expect(piece.count <= pieceSize)
                out.append(contentsOf: piece)
            }
            try inflater.requireFinished()
            #expect(out == plain, "piece size \(pieceSize)")
        }
    }

    @Test("SHA-256 matches the FIPS 180-4 examples")
    func sha256() {
        #expect(SHA256().hexDigest() == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        var abc = SHA256()
        abc.update(Array("abc".utf8))
        #expect(abc.hexDigest() == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        var long = SHA256()
        for byte in "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq".utf8 { long.update([byte]) }
        #expect(long.hexDigest() == "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1")
        var million = SHA256()
        let chunk = [UInt8](repeating: UInt8(ascii: "a"), count: 1_000)
        for _ in 0..<1_000 { million.update(chunk) }
        #expect(million.hexDigest() == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")
        #expect(constantTimeEqual(Array("secret".utf8), Array("secret".utf8)))
        #expect(!constantTimeEqual(Array("secret".utf8), Array("secreT".utf8)))
        #expect(!constantTimeEqual(Array("secret".utf8), Array("secret2".utf8)))
    }
}

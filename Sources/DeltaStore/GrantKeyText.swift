/// A grant key as the databases keep it: 64 lowercase hex digits.
package enum GrantKeyText {
    /// 32 bytes from the system's random number generator, as hex.
    package static func random() -> String {
        var generator = SystemRandomNumberGenerator()
        return (0..<32).map { _ in hex(UInt8.random(in: 0...255, using: &generator)) }.joined()
    }

    /// The bytes `text` spells; nil unless it is exactly 64 lowercase hex digits.
    package static func bytes(_ text: String) -> [UInt8]? {
        let digits = Array(text.utf8)
        guard digits.count == 64 else { return nil }
        var bytes: [UInt8] = []
        for index in stride(from: 0, to: 64, by: 2) {
            guard let byte = UInt8(String(decoding: digits[index..<index + 2], as: UTF8.self), radix: 16),
                hex(byte) == String(decoding: digits[index..<index + 2], as: UTF8.self)
            else { return nil }
            bytes.append(byte)
        }
        return bytes
    }

    private static func hex(_ byte: UInt8) -> String {
        let digits = String(byte, radix: 16)
        return digits.count == 1 ? "0" + digits : digits
    }
}

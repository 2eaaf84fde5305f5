import DeltaSQLite

extension SQLiteStore {
    /// The database's grant key (see `StoreAdministration.grantKey`), kept in `meta` as 64 hex digits.
    public func grantKey() async throws -> [UInt8] {
        let connection = try await writer.checkout()
        defer { writer.checkin(connection) }
        let made = GrantKeyText.random()
        let text = try sqlite {
            try connection.transaction(.immediate) { () throws -> String? in
                try connection.statement("INSERT OR IGNORE INTO meta(key, value) VALUES ('grant_key', ?)").run(.text(made))
                return try connection.text("SELECT value FROM meta WHERE key = 'grant_key'")
            }
        }
        guard let text, let key = GrantKeyText.bytes(text) else {
            throw StoreError(.corrupt, "grant key in \(path)", "is not 64 hex digits", evidence: String(reflecting: String((text ?? "").prefix(80))))
        }
        return key
    }
}

/// A grant key as the databases keep it: 64 lowercase hex digits.
public enum GrantKeyText {
    /// 32 bytes from the system's random number generator, as hex.
    public static func random() -> String {
        var generator = SystemRandomNumberGenerator()
        return (0..<32).map { _ in hex(UInt8.random(in: 0...255, using: &generator)) }.joined()
    }

    /// The bytes `text` spells; nil unless it is exactly 64 lowercase hex digits.
    public static func bytes(_ text: String) -> [UInt8]? {
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

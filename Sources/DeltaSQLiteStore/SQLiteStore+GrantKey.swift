import DeltaSQLite
import DeltaStore

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

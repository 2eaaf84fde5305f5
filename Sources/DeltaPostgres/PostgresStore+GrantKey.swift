import DeltaStore
import PostgresNIO

extension PostgresStore {
    /// The database's grant key (see `StoreAdministration.grantKey`), kept in `deltasnap.meta` as 64 hex
    /// digits: the first instance to ask makes it, every other one reads the same.
    public func grantKey() async throws -> [UInt8] {
        let text = try await withWriter { connection -> String? in
            var binds = PostgresBindings(capacity: 1)
            binds.append(GrantKeyText.random())
            for try await _ in try await query(
                connection, "INSERT INTO deltasnap.meta(key, value) VALUES ('grant_key', $1) ON CONFLICT (key) DO NOTHING", binds)
            {}
            var found: String?
            for try await row in try await query(connection, "SELECT value FROM deltasnap.meta WHERE key = 'grant_key'") { found = try row.decode(String.self) }
            return found
        }
        guard let text, let key = GrantKeyText.bytes(text) else {
            throw StoreError(.corrupt, "grant key in \(location)", "is not 64 hex digits", evidence: String(reflecting: String((text ?? "").prefix(80))))
        }
        return key
    }
}

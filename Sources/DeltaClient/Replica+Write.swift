import DeltaCore
import Foundation

extension Replica {
    /// Writes `record` into `collection`, offline too: visible to reads at once, durable at once,
    /// pushed by the next `sync()`. The app makes the ids (UUIDs, or its own).
    public func put(_ record: Record, in collection: String) throws {
        try outbox.put(record, in: collection)
    }

    /// Encodes `value` as JSON and writes it as a record (it must have a string `"id"`).
    public func put<T: Encodable>(_ value: T, in collection: String, encoder: JSONEncoder = JSONEncoder()) throws {
        let record: Record
        do { record = try Record(parsing: try encoder.encode(value)) } catch {
            throw ReplicaError(.configuration, "the value is not a record (a JSON object with a string \"id\")", evidence: "\(error)")
        }
        try put(record, in: collection)
    }

    /// Deletes record `id` of `collection`, offline too: gone from reads at once, pushed by the next `sync()`.
    public func delete(_ id: String, in collection: String) throws {
        try outbox.delete(id, in: collection)
    }

    /// Where record `id` of `collection` stands: synced, pending, or conflicted.
    public func state(of id: String, in collection: String) throws -> RecordState { try outbox.state(of: id, in: collection) }

    /// Every conflict waiting for the app to resolve it.
    public func conflicts() throws -> [Conflict] { try outbox.conflicts() }

    /// The writes the server's rules refused (`reason` `denied: <rule>`), kept with the local
    /// version until the app discards (`.keepServer`) or edits (`.merged`) them with `resolve`:
    /// never dropped silently. They are among `conflicts()` too.
    public func rejected() throws -> [Conflict] { try outbox.conflicts().filter { $0.reason.hasPrefix("denied") } }

    /// Settles the conflict of record `id`: keep the server's copy, keep the local version, or a merged record.
    public func resolve(_ id: String, in collection: String, _ resolution: Resolution) throws { try outbox.resolve(id, in: collection, resolution) }

    /// This install's client id: the server counts its mutations under it.
    public var clientID: String { outbox.clientID }
}

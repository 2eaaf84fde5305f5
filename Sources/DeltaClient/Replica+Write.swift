import DeltaCore
import DeltaSQLite
import Foundation

extension Replica {
    /// Writes `record` into `collection`, offline too: visible to reads at once, durable at once,
    /// pushed by the next `sync()`. The app makes the ids (UUIDs, or its own). Live queries on
    /// `collection` see it before this returns.
    public func put(_ record: Record, in collection: String) async throws {
        try await put([record], in: collection)
    }

    /// Writes `records` into `collection` in one transaction: all of them or none.
    public func put(_ records: [Record], in collection: String) async throws {
        try writable(collection)
        try await background { [outbox] in try outbox.put(records, in: collection) }
        scheduleWriteRefresh()
    }

    /// Encodes `value` as JSON and writes it as a record (it must have a string `"id"`).
    public func put<T: Encodable>(_ value: T, in collection: String, encoder: JSONEncoder = JSONEncoder()) async throws {
        try await put(try Self.record(encoding: value, encoder), in: collection)
    }

    /// `value` as a record, or a configuration error that says why it is not one.
    static func record<T: Encodable>(encoding value: T, _ encoder: JSONEncoder) throws -> Record {
        do { return try Record(parsing: try encoder.encode(value)) } catch {
            throw ReplicaError(.configuration, "the value is not a record (a JSON object with a string \"id\")", evidence: "\(error)")
        }
    }

    /// Deletes record `id` of `collection`, offline too: gone from reads at once, pushed by the next `sync()`.
    public func delete(_ id: String, in collection: String) async throws {
        try writable(collection)
        try await background { [outbox] in try outbox.delete(id, in: collection) }
        scheduleWriteRefresh()
    }

    /// A configuration error for a collection the replica does not hold; `refused` for one the
    /// server said this credential may not write (a push `denied` with rule `collection`).
    func writable(_ collection: String) throws {
        try reader.check(collection)
        // (A sign-out under way refuses the write in the outbox itself: `Outbox.appWrite`.)
        if readOnly.withLock({ $0.contains(collection) }) {
            throw ReplicaError(
                .refused, "the server takes no writes to \(collection) from this app or user; the write was not queued",
                evidence: "a push was answered denied, rule collection")
        }
    }

    /// Where record `id` of `collection` stands: synced, pending, or conflicted.
    public func state(of id: String, in collection: String) async throws -> RecordState {
        try await background { [outbox] in try outbox.state(of: id, in: collection) }
    }

    /// Every conflict waiting for the app to resolve it.
    public func conflicts() async throws -> [Conflict<Record>] {
        try await background { [outbox] in try outbox.conflicts() }
    }

    /// The writes the server's rules refused (`reason` `denied: <rule>`), kept with the local
    /// version until the app discards (`.keepServer`) or edits (`.merged`) them with `resolve`:
    /// never dropped silently. They are among `conflicts()` too.
    public func rejected() async throws -> [Conflict<Record>] { try await conflicts().filter(\.isDenied) }

    /// Drops one write the server turned down (a `rejected()` write, or any conflict): the local
    /// version goes, the server's copy shows again, and nothing is sent. The same as
    /// `resolve(id, in: collection, .keepServer)`, but only while `conflict` is still the one
    /// waiting for the record: a conflict of a later write to it is not dropped by mistake.
    public func discard<Value>(_ conflict: Conflict<Value>) async throws {
        try await background { [outbox] in try outbox.discard(conflict) }
        scheduleWriteRefresh()
    }

    /// Settles the conflict of record `id`: keep the server's copy, keep the local version, or a merged record.
    public func resolve(_ id: String, in collection: String, _ resolution: Resolution<Record>) async throws {
        // Keeping or merging writes again: only where writes are taken.
        if resolution != .keepServer { try writable(collection) }
        try await background { [outbox] in try outbox.resolve(id, in: collection, resolution) }
        scheduleWriteRefresh()
    }

    /// This install's client id: the server counts its mutations under it.
    public var clientID: String { outbox.clientID }
}

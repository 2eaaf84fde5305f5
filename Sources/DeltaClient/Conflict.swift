import DeltaCore
import Foundation

/// A write the server did not apply because its copy changed since the app's edit, or that it
/// refused (`reason` `denied: <rule>`), or whose pushed value was unusable. Never resolved
/// silently: the app decides with `resolve` or `discard`.
///
/// `Conflict<Record>` (from `Replica.conflicts()`) holds the records as stored: `local` is
/// `hidden` when the app deleted the record, `server` `hidden` when the server did. A typed one
/// (`ReplicaCollection.conflicts()`, `Conflict<Note>`) holds models: `local` is nil when the app
/// deleted the record, `server` nil when the server has none or deleted it (`reason` says which).
public struct Conflict<Value: Sendable>: Sendable {
    /// The collection.
    public let collection: String
    /// The record's id.
    public let id: String
    /// Why: `changed`, `hidden`, `exists`, `unknown-base` (docs/PROTOCOL.md), `denied: <rule>`,
    /// or `invalid: …`.
    public let reason: String
    /// The server's copy when the conflict was found; see the type's description for nil.
    public let server: Value?
    /// The app's version; see the type's description for nil.
    public let local: Value?
    /// The mutation the server turned down.
    public let mutation: UInt64
    /// The records as stored, whatever `Value` is: what resolving sends and compares.
    let serverRecord: Record?
    let localRecord: Record
    /// The collection `ETag` at which `server` was current: a resolution is sent on top of it.
    let serverBase: String?

    /// Whether the server refused the write (its rules, or a collection it takes no writes to),
    /// rather than met another change: `reason` `denied: <rule>`.
    public var isDenied: Bool { reason.hasPrefix("denied") }
}

extension Conflict: Equatable where Value: Equatable {
    /// Equal conflicts: the same record (its id's bytes), reason, versions and mutation.
    public static func == (lhs: Self, rhs: Self) -> Bool {
        lhs.collection == rhs.collection && lhs.id.hasSameBytes(as: rhs.id) && lhs.reason == rhs.reason && lhs.server == rhs.server && lhs.local == rhs.local
            && lhs.mutation == rhs.mutation && lhs.serverBase == rhs.serverBase
    }
}

extension Conflict where Value == Record {
    /// A conflict as the outbox stores it.
    init(collection: String, id: String, reason: String, server: Record?, local: Record, mutation: UInt64, serverBase: String?) {
        self.collection = collection
        self.id = id
        self.reason = reason
        self.server = server
        self.local = local
        self.mutation = mutation
        serverRecord = server
        localRecord = local
        self.serverBase = serverBase
    }

    /// The same conflict with its records decoded as `Model` (a hidden one as nil); throws when
    /// a version does not decode.
    func decoded<Model: Decodable & Sendable>(as type: Model.Type, _ decoder: JSONDecoder) throws -> Conflict<Model> {
        func model(_ record: Record?) throws -> Model? {
            guard let record, !record.hidden else { return nil }
            do { return try decoder.decode(Model.self, from: Data(record.body)) } catch {
                throw ReplicaError(.decoding, "a conflict's version does not decode as \(Model.self)", evidence: "\(collection)/\(id): \(error)")
            }
        }
        return Conflict<Model>(
            collection: collection, id: id, reason: reason, server: try model(serverRecord), local: try model(localRecord), mutation: mutation,
            serverRecord: serverRecord, localRecord: localRecord, serverBase: serverBase)
    }
}

/// How the app settles a conflict.
public enum Resolution<Value: Sendable>: Sendable {
    /// Take the server's copy; the local edit is dropped.
    case keepServer
    /// Keep the app's version: sent again on top of the server's current version.
    case keepLocal
    /// A merged version (same id), sent on top of the server's current version.
    case merged(Value)
}

extension Resolution: Equatable where Value: Equatable {}

/// Where a record read from the replica stands.
public enum RecordState: String, Sendable, Equatable {
    /// As the server has it: no local write waits.
    case synced
    /// A local write waits to be pushed, or for a pull to confirm it.
    case pending
    /// A local write was turned down; `Replica.conflicts()` has both versions.
    case conflicted
}

/// What one push did.
public struct PushSummary: Sendable, Equatable {
    /// Mutations the server applied.
    public var applied = 0
    /// Mutations the server already held exactly.
    public var unchanged = 0
    /// Conflicts found by this push.
    public var conflicts: [Conflict<Record>] = []

    /// An empty summary.
    public init() {}
}

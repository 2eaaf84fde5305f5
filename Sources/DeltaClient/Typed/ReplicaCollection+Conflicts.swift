import DeltaCore
import Foundation

extension ReplicaCollection {
    /// This collection's conflicts and refused writes, as models (`Conflict<Model>`): `local`
    /// nil where the app deleted the record, `server` nil where the server has none or deleted
    /// it. Throws `.decoding` when a version does not decode: a conflict is never left out.
    public func conflicts() async throws -> [Conflict<Model>] {
        try await replica.conflicts().filter { $0.collection == name }.map { try $0.decoded(as: Model.self, decoder) }
    }

    /// The writes of this collection the server refused (`denied`), as models.
    public func rejected() async throws -> [Conflict<Model>] { try await conflicts().filter(\.isDenied) }

    /// Settles the conflict of model `id`: keep the server's copy, keep the local version, or a
    /// merged model (same id), sent on top of the server's current version.
    public func resolve(_ id: Model.ID, _ resolution: Resolution<Model>) async throws {
        let stored: Resolution<Record>
        switch resolution {
        case .keepServer: stored = .keepServer
        case .keepLocal: stored = .keepLocal
        case .merged(let model): stored = .merged(try Replica.record(encoding: model, encoder))
        }
        try await replica.resolve(id.recordID, in: name, stored)
    }

    /// Drops one turned-down write (see `Replica.discard`).
    public func discard(_ conflict: Conflict<Model>) async throws { try await replica.discard(conflict) }

    /// The model `id` now, then again each time it changes (nil while there is none): a detail
    /// view's live record. A version that does not decode ends the stream with `.decoding`.
    public func observe(id: Model.ID) -> AsyncThrowingStream<Model?, any Error> {
        let query = RecordQuery(name, filter: .compare(member: "id", .eq, .string(id.recordID)), limit: 1)
        return replica.observe(query) { [decoder, name] records -> Model? in
            guard let record = records.first else { return nil }
            do { return try decoder.decode(Model.self, from: Data(record.body)) } catch {
                throw ReplicaError(.decoding, "the record does not decode as \(Model.self)", evidence: "\(name)/\(record.id): \(error)")
            }
        }
    }
}

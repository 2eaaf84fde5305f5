/// The size limit on a record's canonical bytes, the form the server stores and sends.
///
/// The canonical form can be longer than what a writer sent (`1e20` is `100000000000000000000`),
/// so a record that fitted the request may not fit a later one: a client that pushes an edit of
/// it back needs room for the record and the push around it. A server therefore takes a record
/// only when its canonical bytes fit its request body limit less `envelopeAllowance`.
public struct RecordSize: Sendable, Equatable {
    /// Room left in a request body for what surrounds one record in a push. 1 KiB.
    public static let envelopeAllowance = 1_024

    /// The most canonical bytes a record may have.
    public let maximumBytes: Int

    /// The limit for a server whose request bodies may have `bodyBytes` bytes.
    public init(bodyLimit bodyBytes: Int) {
        maximumBytes = max(bodyBytes - Self.envelopeAllowance, 0)
    }

    /// Throws unless `record`'s canonical bytes (in wire form, as readers receive them) fit.
    public func check(_ record: Record) throws {
        if let reason = problem(record) { throw WireError(.record, reason) }
    }

    /// Why `record` does not fit, or nil when it does.
    public func problem(_ record: Record) -> String? {
        let bytes = record.body.count + (record.hidden ? Record.hiddenPrefix.count - 1 : 0)
        guard bytes > maximumBytes else { return nil }
        return
            "\(String(reflecting: String(record.id.prefix(60)))) is \(bytes) bytes once written canonically, more than the \(maximumBytes) a record may have (the body limit less \(Self.envelopeAllowance))"
    }
}

extension PushRequest {
    /// The same push with every put whose record does not fit `size` marked invalid (its
    /// mutation keeps its place and id; the push goes on in order).
    public func limited(to size: RecordSize) -> PushRequest {
        guard mutations.contains(where: { $0.record.map { size.problem($0) != nil } ?? false }) else { return self }
        return PushRequest(client: client, mutations: mutations.map { $0.limited(to: size) })
    }
}

extension Mutation {
    /// This mutation, or, for a put whose record does not fit `size`, the same put marked invalid
    /// (the record stays, so its digest, which the push ledger keeps, is that of what was sent).
    func limited(to size: RecordSize) -> Mutation {
        guard let record, let problem = size.problem(record) else { return self }
        return Mutation(
            id: id, collection: collection, operation: operation, recordID: recordID, record: record, problem: "record: \(problem)",
            base: base, create: create)
    }
}

import DeltaCore

/// What a tombstone in an answer carries (docs/PROTOCOL.md, "Deltas" and "Users and rules").
package enum Tombstones: Sendable, Equatable {
    /// The record as stored, marked hidden: public data, where whoever reads the collection may
    /// read every version of every record.
    case whole
    /// `{"hidden":true,"id":"…"}` and nothing else: a collection under rules, where the row that
    /// leaves a reader's rule may now say something that reader may not read (it moved to
    /// another team, it was rewritten after their removal, it was hidden by its owner).
    case bare

    /// The body to send for a tombstone of record `id` whose stored body is `body`.
    func body(id: String, stored body: [UInt8]) -> [UInt8] {
        switch self {
        case .whole: return body
        case .bare: return Record.bareBody(id: id)
        }
    }
}

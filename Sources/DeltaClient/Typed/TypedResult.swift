import DeltaCore
import Foundation

/// A typed query's result: the models that decoded, the records that did not (left out and
/// reported, never failing the whole result), and the cursor of the next page.
public struct TypedResult<Model: Sendable>: Sendable {
    /// The records that decoded, in the query's order.
    public let items: [Model]
    /// The records that did not decode, in the query's order: left out of `items`.
    public let skipped: [SkippedRecord]
    /// Where the next page starts, when the query had a `limit` and filled it.
    public let next: RecordQuery.Cursor?
}

/// A record a typed query left out because it does not decode as the model.
public struct SkippedRecord: Sendable, Equatable {
    /// The record's id.
    public let id: String
    /// Why it did not decode (the decoder's error).
    public let reason: String

    /// Whether the two name the same record for the same reason: ids compare by their UTF-8
    /// bytes, as the store keys them.
    public static func == (lhs: SkippedRecord, rhs: SkippedRecord) -> Bool { lhs.id.hasSameBytes(as: rhs.id) && lhs.reason == rhs.reason }
}

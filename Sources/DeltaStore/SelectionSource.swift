public import DeltaCore

/// What a backend gives a selection's read (`SelectionFeed`): from one open read transaction,
/// the records changed after a position with the version each had at that position, and the
/// visible records in `id` order. The rules that turn them into an exact answer live in
/// `SelectionFeed`, the same for every backend.
public protocol SelectionSource: AnyObject, Sendable {
    /// The collection's current token (no selection mark).
    var token: Token { get }
    /// The next records changed after the read's position (at most `maximum`), nil at the end.
    func changed(maximum: Int) async throws -> [ChangedRecord]?
    /// Visible records in `id` order (byte order of the UTF-8) with ids after `after` and up to
    /// `through` (either nil: no bound), at most `maximum`; with `unchangedSince`, only those
    /// whose current version was written at or before that position.
    func visible(after: String?, through: String?, unchangedSince: UInt64?, maximum: Int) async throws -> [StoredBody]
    /// Visible records in descending `id` order, from `from` (included when `inclusive`) down, at most `maximum`.
    func visible(downFrom from: String, inclusive: Bool, maximum: Int) async throws -> [StoredBody]
    /// Starts `changed` over from the first record.
    func rewindChanged() async throws
    /// Ends the read transaction; safe to call more than once.
    func close()
}

/// A record's canonical body, with its id.
public struct StoredBody: Sendable {
    /// The record's id.
    public let id: String
    /// Its canonical JSON.
    public let body: [UInt8]

    /// Creates one.
    public init(id: String, body: [UInt8]) {
        self.id = id
        self.body = body
    }
}

/// A record changed after a read's position: its current version, and the one visible then.
public struct ChangedRecord: Sendable {
    /// The record's id.
    public let id: String
    /// Whether the current version is hidden.
    public let hidden: Bool
    /// The current version's canonical JSON.
    public let body: [UInt8]
    /// The version that was visible at the read's position; nil when the record did not exist
    /// then or was hidden.
    public let before: [UInt8]?

    /// Creates one.
    public init(id: String, hidden: Bool, body: [UInt8], before: [UInt8]?) {
        self.id = id
        self.hidden = hidden
        self.body = body
        self.before = before
    }
}

/// The start of a selection's read: an answer that needs no records, or a source to compute one from.
public enum SelectionStart: Sendable {
    /// Not modified (nothing in the collection changed), or the token is rejected.
    case answer(ReadResult)
    /// Compute the answer from `source`: the full selection, or its changes after a position.
    case source(any SelectionSource, FeedMode)
}

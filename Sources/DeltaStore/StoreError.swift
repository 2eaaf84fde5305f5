/// The one public error type of `DeltaStore`. Messages read `what: why (evidence)`.
public struct StoreError: Error, Sendable, CustomStringConvertible {
    /// What went wrong, in kinds a caller can act on.
    public enum Kind: String, Sendable {
        /// The record or collection does not exist.
        case notFound
        /// The writes themselves are invalid (for example the same id twice in one commit).
        case invalidWrite
        /// A push's mutation ids do not continue the client's sequence: a gap, or an id reused
        /// with a different payload.
        case mutationSequence
        /// The database file could not be opened or used.
        case unavailable
        /// The database was written by a newer DeltaSnapshot, or is not a DeltaSnapshot database.
        case incompatible
        /// The database failed a consistency check.
        case corrupt
        /// A push names a client id that belongs to another user (the first that pushed with it).
        case clientOwned
        /// Uploaded bytes whose SHA-256 is not the hash they were uploaded under.
        case blobHash
        /// An upload larger than the limit it was given.
        case tooLarge
        /// A user's write checked against other rules than the database holds now (another
        /// instance started with another rules file).
        case rulesMismatch
        /// A resumed upload whose offset is not the number of bytes kept of it (`keptBytes`).
        case uploadOffset
    }

    /// The kind of failure.
    public let kind: Kind
    /// What failed, e.g. `record "a" in widgets`.
    public let what: String
    /// Why it failed.
    public let reason: String
    /// The evidence, when there is some.
    public let evidence: String?
    /// For `mutationSequence`: the client's last mutation id the store has recorded.
    public var lastMutation: UInt64?
    /// For `uploadOffset`: how many bytes of the upload are kept, where it may resume.
    public var keptBytes: Int64?

    /// Creates an error.
    public init(_ kind: Kind, _ what: String, _ reason: String, evidence: String? = nil) {
        self.kind = kind
        self.what = what
        self.reason = reason
        self.evidence = evidence
    }

    /// `what: why (evidence)`.
    public var description: String {
        evidence.map { "\(what): \(reason) (\($0))" } ?? "\(what): \(reason)"
    }
}

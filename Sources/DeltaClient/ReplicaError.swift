import DeltaSQLite
import Foundation

/// The one public error type of `DeltaClient`: why an open or a sync did not complete.
///
/// Messages read `what: why (evidence)`. A sync that throws has left the replica's data as it
/// was (or, after a reset, at the bundled snapshot's state): nothing is ever half-applied.
public struct ReplicaError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What went wrong.
    public enum Kind: String, Sendable {
        /// The server could not be reached, or the transfer broke off (no network, a timeout).
        case network
        /// The server answered `5xx` or `429`: it is there but cannot serve now.
        case serverUnavailable
        /// A sync was asked for before the back-off after the last failure ran out; nothing was sent.
        case backingOff
        /// The server refused the request for good (`404` for an unknown collection, `400`, …): check the configuration.
        case refused
        /// Even a full download could not be applied; the collection was left at the bundled snapshot.
        case unusableAnswer
        /// The bundled snapshot cannot be read or fails its checks.
        case snapshot
        /// The local store cannot be opened, read or written.
        case store
        /// The configuration is not usable (a URL that is not http or https, say).
        case configuration
        /// A stored record does not decode as the app's model (`ReplicaCollection.get`).
        case decoding
        /// The device has no space left for the store to write: the write (a sync's, or the
        /// app's `put`) changed nothing, or, as the error says, only what it names. Reads go on;
        /// the next sync once there is space picks up where this one stopped.
        case diskFull
    }

    /// What went wrong.
    public let kind: Kind
    /// Why, in a sentence fragment.
    public let reason: String
    /// The evidence (a status code, a path, an underlying error), when there is one.
    public let evidence: String?
    /// When the next attempt may be made, for `.network`, `.serverUnavailable` and `.backingOff`.
    public let retryAt: Date?

    /// Creates an error.
    public init(_ kind: Kind, _ reason: String, evidence: String? = nil, retryAt: Date? = nil) {
        self.kind = kind
        self.reason = reason
        self.evidence = evidence
        self.retryAt = retryAt
    }

    /// Whether the next sync may simply be retried later (the replica kept its data).
    public var isTransient: Bool { [.network, .serverUnavailable, .backingOff, .diskFull].contains(kind) }

    /// A SQLite failure as a replica error: `.diskFull` when the device is out of space (SQLite's
    /// `SQLITE_FULL`, or shared memory it could not make), `.store` otherwise.
    init(_ reason: String, storing error: SQLiteError, path: String) {
        let full = error.code & 0xFF == 13 || error.code == 4874  // SQLITE_FULL, SQLITE_IOERR_SHMSIZE
        self.init(full ? .diskFull : .store, full ? "\(reason): the device is out of space" : reason, evidence: "\(path): \(error)")
    }

    /// `what: why (evidence)`.
    public var description: String {
        let what: String
        switch kind {
        case .network: what = "network"
        case .serverUnavailable: what = "server unavailable"
        case .backingOff: what = "backing off"
        case .refused: what = "refused"
        case .unusableAnswer: what = "unusable answer"
        case .snapshot: what = "snapshot"
        case .store: what = "store"
        case .configuration: what = "configuration"
        case .decoding: what = "decoding"
        case .diskFull: what = "disk full"
        }
        return evidence.map { "\(what): \(reason) (\($0))" } ?? "\(what): \(reason)"
    }

    /// A collection the store does not hold (not in its bundled snapshot): a misspelled name is
    /// an error at once, not an empty answer.
    static func unknownCollection(_ name: String, known: Set<String>) -> ReplicaError {
        ReplicaError(
            .configuration, "no collection \(String(reflecting: name)) in this replica; its bundled snapshot holds \(known.sorted().joined(separator: ", "))",
            evidence: name)
    }

    /// The same error with the retry time set.
    func retrying(at date: Date) -> ReplicaError {
        ReplicaError(kind, reason, evidence: evidence, retryAt: date)
    }
}

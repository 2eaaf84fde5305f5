import DeltaCore
import DeltaStore
import HTTPTypes
import Hummingbird

/// A conditional write's precondition (RFC 9110 §13.1): `If-Match` with the record's strong
/// `ETag`s or `*`, or `If-None-Match: *` to create. Checked inside the write transaction, so
/// nothing can change the record between the check and the write.
enum Precondition: Sendable, Equatable {
    /// No precondition: the owner's unconditional write.
    case none
    /// `If-Match: *`: the record must exist.
    case exists
    /// `If-Match: "…", "…"`: the record's current `ETag` must be one of these (strong comparison).
    case matches([String])
    /// `If-None-Match: *`: the record must not exist.
    case absent

    /// Reads the precondition headers; `400` for an `If-None-Match` other than `*` on a write.
    init(_ headers: HTTPFields) throws {
        if let value = headers[.ifMatch]?.trimmingWhitespace, !value.isEmpty {
            if value == "*" {
                self = .exists
                return
            }
            self = .matches(value.split(separator: ",").map { String($0).trimmingWhitespace })
        } else if let value = headers[.ifNoneMatch]?.trimmingWhitespace, !value.isEmpty {
            guard value == "*" else {
                throw Problem.badRequest(
                    "invalid-precondition", "If-None-Match: a write takes only * (create) (got \(String(reflecting: String(value.prefix(100)))))")
            }
            self = .absent
        } else {
            self = .none
        }
    }

    /// Checks the precondition against `current`, the record the write transaction holds under
    /// `id`, of which the writer may read `seen` (nil: nothing).
    ///
    /// When it fails: `412` with `seen` as `record` and the current `ETag`; without either when
    /// no record is stored; and `403 denied` with rule `read` when a record is stored that the
    /// writer may not read, the same whatever that record holds (visible or hidden, any version):
    /// an answer never shows what its principal may not read.
    func check(_ id: String, in collection: CollectionName, current: StoredRecord?, seen: Record?) throws {
        guard self != .none else { return }
        let holds: Bool
        switch self {
        case .none: holds = true
        case .exists: holds = current != nil
        case .absent: holds = current == nil
        case .matches(let tags): holds = current.map { tags.contains($0.entityTag) } ?? false
        }
        guard !holds else { return }
        var values: [(String, JSONValue)] = []
        var headers: HTTPFields = [:]
        var state = "it does not exist"
        if let current {
            guard let seen else { throw Self.unread(id, in: collection) }
            values.append(("record", try JSONValue(parsing: seen.wireJSON)))
            headers[.eTag] = current.entityTag
            state = "its ETag is \(current.entityTag)\(seen.hidden ? ", hidden" : "")"
        }
        throw Problem(
            .preconditionFailed, "precondition-failed",
            "record \(String(reflecting: id)) in \(collection): the precondition does not hold (\(state)); read it again and retry",
            values: values, headers: headers)
    }

    /// `403 denied`, rule `read`: a record the writer may not read holds `id`, so it is neither
    /// created over nor written unseen, and nothing of it is shown.
    static func unread(_ id: String, in collection: CollectionName) -> Problem {
        Problem(
            .forbidden, "denied",
            "record \(String(reflecting: id)) in \(collection): a record you may not read holds this id, and the precondition does not hold",
            extensions: [("rule", Push.unreadRule)])
    }
}

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

    /// `412` with the current record when the precondition fails.
    func check(_ id: String, in collection: CollectionName, _ transaction: any WriteTransaction) async throws {
        guard self != .none else { return }
        let current = try await transaction.stored(id)
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
        if let current {
            values.append(("record", try JSONValue(parsing: current.record.wireJSON)))
            headers[.eTag] = current.entityTag
        }
        let state = current.map { "its ETag is \($0.entityTag)\($0.record.hidden ? ", hidden" : "")" } ?? "it does not exist"
        throw Problem(
            .preconditionFailed, "precondition-failed",
            "record \(String(reflecting: id)) in \(collection): the precondition does not hold (\(state)); read it again and retry",
            values: values, headers: headers)
    }
}

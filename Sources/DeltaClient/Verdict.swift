import DeltaCore
import Foundation

/// What an answer from the server means for the collection, before anything is applied.
enum Verdict {
    /// `304`: the data stays, if it still sums to `digest`; the validators it repeats (when it sent both) are stored.
    case notModified(entityTag: String?, lastModified: String?, digest: StateDigest)
    /// A `200` to apply.
    case apply(Answer)
    /// The answer cannot be used: reset to the snapshot.
    case reset(ResetReason)

    /// Reads the status and headers of `fetched`, the answer to a request sent with `sent`
    /// (nil: unconditional). Throws `ReplicaError` for failures that are not the delta's fault.
    init(_ fetched: Fetched, sent: CollectionState?) throws {
        switch fetched.status {
        case 304:
            guard sent != nil else {
                self = .reset(.integrity("304 to a request without validators"))
                return
            }
            guard let digest = Self.digest(fetched) else {
                self = .reset(.integrity("a 304 without a valid Delta-Digest"))
                return
            }
            self = .notModified(entityTag: fetched.header("ETag"), lastModified: fetched.header("Last-Modified"), digest: digest)
        case 409:
            self = .reset(.serverSignal(fetched.header(DeltaHeader.reset) ?? "409 without \(DeltaHeader.reset)"))
        case 200:
            guard let entityTag = fetched.header("ETag"), let lastModified = fetched.header("Last-Modified") else {
                self = .reset(.integrity("a 200 without ETag and Last-Modified"))
                return
            }
            guard let digest = Self.digest(fetched) else {
                self = .reset(.integrity("a 200 without a valid Delta-Digest"))
                return
            }
            switch fetched.header(DeltaHeader.mode) {
            case "full":
                self = .apply(Answer(file: fetched.body, mode: .full, entityTag: entityTag, lastModified: lastModified, digest: digest))
            case "delta":
                guard let sent, fetched.header(DeltaHeader.base) == sent.entityTag else {
                    let base = fetched.header(DeltaHeader.base).map { String(reflecting: $0) } ?? "none"
                    self = .reset(.integrity("a delta computed from another token (Delta-Base \(base), sent \(String(reflecting: sent?.entityTag ?? "none")))"))
                    return
                }
                self = .apply(Answer(file: fetched.body, mode: .delta, entityTag: entityTag, lastModified: lastModified, digest: digest))
            case nil where sent == nil:
                self = .apply(Answer(file: fetched.body, mode: .full, entityTag: entityTag, lastModified: lastModified, digest: digest))
            case let other:
                self = .reset(.integrity("a 200 with Delta-Mode \(other.map { String(reflecting: $0) } ?? "missing")"))
            }
        case 429, 500...599:
            throw ReplicaError(
                .serverUnavailable, "the server cannot answer now", evidence: "\(fetched.status): \(fetched.excerpt().prefix(200))",
                retryAt: fetched.header("Retry-After").flatMap(Self.retryAfter))
        default:
            throw ReplicaError(.refused, "the server refused the request", evidence: "\(fetched.status): \(fetched.excerpt().prefix(200))")
        }
    }

    /// The answer's `Delta-Digest`: 64 lowercase hex digits, or nil.
    static func digest(_ fetched: Fetched) -> StateDigest? {
        fetched.header(DeltaHeader.digest).flatMap { StateDigest(hex: $0) }
    }

    /// A `Retry-After` value: delay seconds or an HTTP date.
    static func retryAfter(_ value: String) -> Date? {
        let text = value.trimmingCharacters(in: .whitespaces)
        if let seconds = UInt32(text) { return Date().addingTimeInterval(TimeInterval(seconds)) }
        return HTTPDate.parse(text).map { Date(timeIntervalSince1970: TimeInterval($0)) }
    }
}

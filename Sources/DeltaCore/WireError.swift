/// The one public error type of `DeltaCore`: something on the wire is not what the format says.
///
/// Messages read `what: why (evidence)`, for example
/// `record: "id" must be a string (found number at byte 7)`.
public struct WireError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What kind of wire data failed.
    public enum Kind: String, Sendable {
        /// A JSON document that is not valid JSON, or too deep, or too large.
        case json
        /// A JSON value that is valid but is not a record (an object with a string `"id"`).
        case record
        /// A token (`ETag` or `Last-Modified` value) that this format did not issue.
        case token
        /// A collection name outside `[A-Za-z0-9_-]{1,64}`.
        case collectionName
        /// A zlib or gzip stream that could not be compressed or decompressed.
        case compression
        /// A snapshot file that fails its checks.
        case snapshot
        /// CSV input that is not well-formed, or does not match its header.
        case csv
        /// A push body (`POST /push`) or its answer that does not follow docs/PROTOCOL.md.
        case push
        /// A selection's `filter` or `limit` that does not follow docs/PROTOCOL.md, or exceeds its bounds.
        case filter
        /// A rules file (`deltasnap serve --rules`) that does not follow docs/PROTOCOL.md, "Users and rules".
        case rules
        /// Claims (of a token, or given on the command line) that rules cannot use.
        case claims
        /// A blob's hash, or a record's blob reference, that does not follow docs/PROTOCOL.md, "Files".
        case blob
    }

    /// What kind of wire data failed.
    public let kind: Kind
    /// Why it failed, in a sentence fragment.
    public let reason: String
    /// The evidence: the offending value, offset or count, when there is one.
    public let evidence: String?
    /// Where in a JSON document the failure is, as a JSON Pointer (RFC 6901, `/tags/2/name`),
    /// when it is inside an object or array; nil at the top level and for non-JSON failures.
    public let pointer: String?

    /// Creates an error of `kind` with `reason`, optional `evidence` and optional `pointer`.
    public init(_ kind: Kind, _ reason: String, evidence: String? = nil, pointer: String? = nil) {
        self.kind = kind
        self.reason = reason
        self.evidence = evidence
        self.pointer = pointer
    }

    /// The same error one level further out: inside the member or array index `token`.
    public func within(_ token: String) -> WireError {
        var escaped = ""
        for character in token {
            switch character {
            case "~": escaped += "~0"
            case "/": escaped += "~1"
            default: escaped.append(character)
            }
        }
        return WireError(kind, reason, evidence: evidence, pointer: "/" + escaped + (pointer ?? ""))
    }

    /// `what: why (evidence)`.
    public var description: String {
        let what: String
        switch kind {
        case .json: what = "JSON"
        case .record: what = "record"
        case .token: what = "token"
        case .collectionName: what = "collection name"
        case .blob: what = "blob"
        case .compression: what = "compression"
        case .snapshot: what = "snapshot"
        case .csv: what = "CSV"
        case .push: what = "push"
        case .filter: what = "filter"
        case .rules: what = "rules"
        case .claims: what = "claims"
        }
        switch (pointer, evidence) {
        case (let pointer?, let evidence?):
            let rest = evidence.hasPrefix("at ") ? evidence.dropFirst(3) : evidence[...]
            return "\(what): \(reason) (at \(pointer), \(rest))"
        case (let pointer?, nil): return "\(what): \(reason) (at \(pointer))"
        case (nil, let evidence?): return "\(what): \(reason) (\(evidence))"
        case (nil, nil): return "\(what): \(reason)"
        }
    }
}

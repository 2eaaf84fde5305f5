import DeltaCore
import DeltaStore
import HTTPTypes
import Hummingbird

/// What a GET's conditional headers ask for, per RFC 9110 §13.2.2: `If-None-Match` wins over `If-Modified-Since`.
struct Conditional: Sendable {
    /// Where the read starts, or why it cannot be honoured.
    enum Start: Sendable {
        case read(Since)
        case rejected(TokenRejection)
    }

    /// Where the read starts, or why it cannot be honoured.
    let since: Start
    /// The validator the delta is computed from, exactly as the client sent it (for `Delta-Base`).
    let base: String?

    init(_ headers: HTTPFields) {
        self.init(ifNoneMatch: headers[.ifNoneMatch], ifModifiedSince: headers[.ifModifiedSince])
    }

    /// The same from the two validators' values, as the request sent them (each field's values
    /// joined, as `HTTPFields` gives them); the early paths read them without the whole fields.
    init(ifNoneMatch: String?, ifModifiedSince: String?) {
        if let tag = ifNoneMatch {
            base = tag
            if let token = try? Token(entityTag: tag.trimmingWhitespace) {
                since = .read(.token(token))
            } else {
                since = .rejected(.malformed)
            }
        } else if let date = ifModifiedSince {
            base = date
            if let position = try? Token.position(lastModified: date.trimmingWhitespace) {
                since = .read(.position(position))
            } else {
                since = .rejected(.malformed)
            }
        } else {
            base = nil
            since = .read(.nothing)
        }
    }
}

extension Conditional {
    /// What the early `304` path asks the store (`EarlyVerdicts`) for a `GET` of
    /// `/api/` + `collection` with these validators: nil unless the collection name is valid and
    /// the request carries a validator that parses and is not a selection's (a path with a query
    /// string is not a collection name, so selections never take the early paths).
    static func notModifiedQuestion(collection: some StringProtocol, ifNoneMatch: String?, ifModifiedSince: String?) -> (CollectionName, Since)? {
        guard let name = try? CollectionName(String(collection)),
            case .read(let since) = Conditional(ifNoneMatch: ifNoneMatch, ifModifiedSince: ifModifiedSince).since, since != .nothing
        else { return nil }
        if case .token(let token) = since, token.selection != nil { return nil }
        return (name, since)
    }
}

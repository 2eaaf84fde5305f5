import DeltaCore
import DeltaStore
import Foundation
import Hummingbird

/// `GET /api/{collection}?filter=<JSON>&limit=<N>`: a selection's full answer or exact delta
/// (docs/PROTOCOL.md, "Selections"), computed by `SelectionFeed`.
extension ReadRoute {
    /// The selection the query string asks for (`.everything` without `filter` and `limit`).
    func requestedSelection(_ request: Request) throws -> Selection {
        let parameters = request.uri.queryParameters
        let filters = parameters[values: "filter"]
        let limits = parameters[values: "limit"]
        guard filters.count <= 1, limits.count <= 1 else {
            throw Problem.badRequest("invalid-filter", "filter: give filter and limit at most once each (got \(filters.count) and \(limits.count))")
        }
        // The query decoder turns bytes that are not UTF-8 into U+FFFD: a filter must arrive whole.
        for raw in Self.rawValues("filter", in: request.uri.query) where raw.removingPercentEncoding == nil {
            throw Problem.badRequest("invalid-filter", "filter: not UTF-8 once percent-decoded (\(String(reflecting: String(raw.prefix(60)))))")
        }
        return try Selection(filter: filters.first.map(String.init), limit: limits.first.map(String.init))
    }

    /// The values of query parameter `name` as sent, still percent-encoded (`+` left as it is).
    static func rawValues(_ name: String, in query: String?) -> [Substring] {
        guard let query else { return [] }
        return query.split(separator: "&").compactMap { pair in
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            return parts.first == Substring(name) ? (parts.count > 1 ? parts[1] : "") : nil
        }
    }

    /// Whether `since` is a token issued to a selection.
    static func isSelectionToken(_ since: Since) -> Bool {
        if case .token(let token) = since { return token.selection != nil }
        return false
    }

    /// Reads `selection` of `collection`: a token must have been issued to this same selection
    /// (else `409`, `Delta-Reset: selection-changed`); a date alone cannot say which selection it
    /// was for, so it is refused the same way. Without `computing`, a read that would compute an
    /// answer returns an empty feed at the collection's token instead (a redirect needs only that).
    func selectionRead(
        _ collection: CollectionName, _ selection: Selection, since: Since, client: String?, sent: String?, computing: Bool = true
    ) async throws -> (ReadResult, UInt64?) {
        var mark: SelectionMark?
        switch since {
        case .nothing: break
        case .position: throw reset(.selectionChanged, sent: sent)
        case .token(let token):
            guard let tokenMark = token.selection, !selection.isEverything, tokenMark.fingerprint == selection.fingerprint else {
                throw reset(.selectionChanged, sent: sent)
            }
            mark = tokenMark
        }
        let (start, lastMutation) = try await store.openSelectionRead(collection, since: since, client: client)
        switch start {
        case .answer(.notModified(let token, _)):
            // Nothing in the collection changed, so nothing in the selection did: same mark, same digest.
            return (.notModified(token.marked(mark), mark?.digest ?? .empty), lastMutation)
        case .answer(let result):
            return (result, lastMutation)
        case .source(let source, let mode) where !computing:
            source.close()
            return (.changes(EmptyFeed(token: source.token, digest: .empty, mode: mode)), lastMutation)
        case .source(let source, let mode):
            return (try await SelectionFeed.open(source, mode, selection: selection, mark: mark), lastMutation)
        }
    }
}

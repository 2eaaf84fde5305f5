import DeltaCore
import DeltaRules
import DeltaStore
import HTTPTypes
import Hummingbird

/// Reads under rules (docs/PROTOCOL.md, "Users and rules"): a user receives exactly the rows
/// the collection's read rule gives them, ANDed with their own selection; the answer's token is
/// bound to the user and to the rules, and its deltas bring in rows that became visible and
/// tombstone rows that stopped being visible, changed or not (`SelectionFeed`'s `held`).
extension ReadRoute {
    /// A user's read of `collection`: `selection` (their own filter and limit) within the read rule.
    func userRead(
        _ collection: CollectionName, _ claims: Claims, _ selection: Selection, since: Since, client: String?, sent: String?, granting: Request? = nil
    ) async throws -> (ReadResult, UInt64?) {
        let policy = configuration.readPolicy
        guard let stored = configuration.rules, case .rule(let filter, _) = try policy.userScope(of: collection, for: claims),
            let user = policy.userMark(of: collection, for: claims)
        else {
            throw Problem(.forbidden, "not-readable", "collection \(collection): the rules give users no reads of it")
        }
        var mark: SelectionMark?
        switch since {
        case .nothing: break
        case .position: throw reset(.userChanged, sent: sent)
        case .token(let token):
            if let refusal = policy.refusal(of: token.selection, for: claims, reading: collection, fingerprint: selection.fingerprint) {
                throw reset(refusal, sent: sent)
            }
            mark = token.selection
        }
        // Nothing but the changed records will be asked of the source: no `$rows` source to read,
        // no limit's cut to find, no grant to sign (which reads the newest token).
        let changesAlone = filter.sources.isEmpty && selection.limit == nil && (granting == nil || configuration.readGrants == nil)
        let (start, lastMutation) =
            changesAlone
            ? try await store.openRuleChanges(collection, since: since, client: client) : try await store.openRuleRead(collection, since: since, client: client)
        switch start {
        case .rejected(let rejection):
            return (.rejected(rejection), lastMutation)
        case .source(let source, let mode):
            do {
                try stored.check(source)
                let now = try await source.resolve(filter, for: claims)
                var held: Selection?
                if case .delta(let position) = mode { held = try Self.within(try await source.resolve(filter, for: claims, at: position), selection) }
                let within = try Self.within(now, selection)
                // The same rows as at the token: the answer may be a granted cacheable read, shared.
                if let request = granting, let grants = configuration.readGrants, held == nil || held == within,
                    let granted = try await grantedUserRead(
                        collection, source, mode, rule: filter, rows: now, selection: selection, mark: mark, since: since, user: user, grants: grants,
                        request: request)
                {
                    return (granted, lastMutation)
                }
                let result = try await SelectionFeed.open(
                    source, mode, selection: within, mark: mark, held: held, user: user, fingerprint: selection.fingerprint, tombstones: .bare)
                return (result, lastMutation)
            } catch {
                source.close()
                throw error
            }
        }
    }

    /// The user's selection within the rule: its filter ANDed with the rule's, its limit kept.
    static func within(_ rule: Filter, _ selection: Selection) throws -> Selection {
        try Selection(filter: selection.filter.map { .and([rule, $0]) } ?? rule, limit: selection.limit)
    }
}

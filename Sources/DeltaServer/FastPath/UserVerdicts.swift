import DeltaCore
import DeltaStore

/// Early `304`s for users (docs/PROTOCOL.md, "Users and rules"), answered from the connection's
/// bytes like the public ones, without the router.
///
/// Only the plainest case, and only when it is exact: a read of a rule-restricted collection
/// without a selection of the user's own, a token issued to this user (the same binding) under
/// the rules the server holds, a bearer token already verified and not expired (`Authenticator`
/// keeps them by hash), and neither the collection nor any collection its rule reads (`$rows`)
/// changed after the token's position. Then the user's rows cannot have changed, and the answer
/// is the token they sent. Anything else (a first verification, an expired token, another user,
/// a change, a store that needs a round trip) goes to the router, which decides it fully.
struct UserVerdicts: Sendable {
    /// The store's own verdicts, public or not.
    let store: any EarlyVerdicts
    let rules: StoredRules
    let authenticator: Authenticator

    /// The token and digest of the `304`, or nil when the router must answer.
    func notModified(collection target: String, ifNoneMatch: String?, authorization: String?) -> (Token, StateDigest)? {
        guard let ifNoneMatch, let authorization, authorization.utf8.count > 7,
            authorization.prefix(7).lowercased() == "bearer ",
            let name = try? CollectionName(target),
            let rule = rules.rules.rule(for: name), case .when(let filter) = rule.read,
            let token = try? Token(entityTag: ifNoneMatch), let mark = token.selection, let user = mark.user,
            user.rulesVersion == rules.version, mark.fingerprint == Selection.everything.fingerprint,
            let claims = authenticator.cachedClaims(of: String(authorization.dropFirst(7))),
            claims.binding(reading: rule.readClaims) == user.binding
        else { return nil }
        let since = Since.token(token.marked(nil))
        for collection in [name] + filter.sources.map(\.collection) {
            guard case .notModified = store.earlyVerdict(collection, since: since) else { return nil }
        }
        return (token, mark.digest)
    }
}

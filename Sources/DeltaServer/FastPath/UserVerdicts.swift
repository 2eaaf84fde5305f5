import DeltaCore
import DeltaRules
import DeltaStore
import Foundation
import NIOConcurrencyHelpers

/// Early `304`s for users (docs/PROTOCOL.md, "Users and rules"), answered from the connection's
/// bytes like the public ones, without the router.
///
/// Only the plainest case, and only when it is exact: a read of a rule-restricted collection
/// without a selection of the user's own, a token issued to this user (the same binding) under
/// the rules the server holds, a bearer token already verified, not expired and verified with a
/// key set still in force (`Authenticator` keeps them by hash; `holds`), and neither the collection nor any collection its rule reads (`$rows`)
/// changed after the token's position. Then the user's rows cannot have changed, and the answer
/// is the token they sent. Anything else (a first verification, an expired token, another user,
/// a change, rules that changed since the admission) goes to the router, which decides it fully.
struct UserVerdicts: Sendable {
    /// The store's own verdicts, public or not.
    let store: any EarlyVerdicts
    /// The rules as they are at each request (they may change while the server runs).
    let rules: LiveRules
    /// Verifies bearer tokens, and keeps the verified ones by hash.
    let authenticator: Authenticator

    /// What a request was found to be: a user's token, checked, for a read that depends on these
    /// collections. A connection keeps the last one, since it usually repeats the same request.
    struct Admission: Sendable {
        let token: Token
        let digest: StateDigest
        let collections: [CollectionName]
        /// When the bearer token expires (seconds since 1970).
        let expires: Double
        /// The generation of the JWK Set whose key verified the token (nil: the HS256 secret): a
        /// connection that repeats the request is answered early only while it holds.
        let generation: UInt64?
        /// The rules version the admission was decided under: under another one, it no longer holds.
        let rulesVersion: UInt64
    }

    private static let everything = Selection.everything.fingerprint

    /// The admission of a request, or nil when the router must answer it.
    func admit(collection target: String, ifNoneMatch: String?, authorization: String?) -> Admission? {
        let rules = self.rules.current
        let policy = ReadPolicy(rules: rules)
        // The cheap checks first; then the router's own: the read rule for these claims, and the
        // token issued to exactly them under these rules (`ReadPolicy.refusal`).
        guard let ifNoneMatch, let authorization, authorization.utf8.count > 7,
            authorization.prefix(7).lowercased() == "bearer ",
            let name = try? CollectionName(target), !policy.isPublic(name),
            let token = try? Token(entityTag: ifNoneMatch), let mark = token.selection, mark.user?.rulesVersion == rules.version,
            let (claims, expires, generation) = authenticator.cachedClaims(of: String(authorization.dropFirst(7))),
            case .rule(let filter, _)? = try? policy.userScope(of: name, for: claims),
            policy.refusal(of: mark, for: claims, reading: name, fingerprint: Self.everything) == nil
        else { return nil }
        return Admission(
            token: token, digest: mark.digest, collections: [name] + filter.sources.map(\.collection), expires: expires, generation: generation,
            rulesVersion: rules.version)
    }

    /// Whether `admission` may be answered `304` now: its token has not expired, the key set that
    /// verified it is still in force (`Authenticator.holds`), the rules are still the version it
    /// was admitted under, and nothing it depends on changed after its position. A store that
    /// must ask its database for some of those collections (PostgreSQL) gets the questions asked
    /// together, and the `304` only when every one of them is answered "not modified".
    func verdict(_ admission: Admission, now: Double = Date().timeIntervalSince1970) -> EarlyVerdict {
        guard now <= admission.expires + Authenticator.leeway, authenticator.holds(admission.generation), admission.rulesVersion == rules.version else {
            return .unknown
        }
        let since = Since.token(admission.token.marked(nil))
        var asks: [@Sendable (@escaping EarlyVerdict.Reply) -> Void] = []
        for collection in admission.collections {
            switch store.earlyVerdict(collection, since: since) {
            case .notModified: continue
            case .ask(let ask): asks.append(ask)
            case .unknown: return .unknown
            }
        }
        let answer = (token: admission.token, digest: admission.digest)
        guard !asks.isEmpty else { return .notModified(answer.token, answer.digest) }
        return .ask { [asks] reply in
            let remaining = NIOLockedValueBox((count: asks.count, current: true))
            for ask in asks {
                ask { current in
                    let done = remaining.withLockedValue { state -> Bool? in
                        state.count -= 1
                        if current == nil { state.current = false }
                        return state.count == 0 ? state.current : nil
                    }
                    if let done { reply(done ? answer : nil) }
                }
            }
        }
    }
}

import DeltaCore
import DeltaRules
import DeltaStore
import HTTPTypes

/// What each principal may read (docs/SECURITY.md, "What every answer shows"): the one decision
/// every answer that shows rows asks, made from the rules the request is decided under. Reads
/// of collections and of single records, grants, blobs and the users' early `304`s all ask it;
/// writes ask its counterpart in the store, `Principal`, which applies the same read rule to
/// what a conflict, a denial or a `412` may show.
struct ReadPolicy: Sendable {
    /// The rules (nil: none, every collection public).
    let rules: StoredRules?

    /// What a reader may read of a collection.
    enum Scope: Sendable {
        /// Every row, every version: public data, or the owner.
        case everything
        /// The rows `filter` gives the user `claims`, resolved in the read's own transaction.
        case rule(RuleFilter, Claims)
    }

    /// Whether reads of `collection` are the same for everyone: no rules, or `"read": true`.
    func isPublic(_ collection: CollectionName) -> Bool { rules.map { $0.rules.isPublic(collection) } ?? true }

    /// The collections the rules make public; nil without rules (every collection is).
    var publicCollections: [CollectionName]? {
        rules.map { stored in stored.rules.collections.keys.compactMap { try? CollectionName($0) }.filter { stored.rules.isPublic($0) } }
    }

    /// What `caller` may read of `collection`. Public data answers without looking at who asks;
    /// else the owner reads everything and a user the rows of the read rule; `401` without a
    /// credential (or with one that does not verify), `403 not-readable` for the client key and
    /// for a collection the rules give users no reads of.
    func scope(of collection: CollectionName, for caller: Caller) async throws -> Scope {
        guard !isPublic(collection) else { return .everything }
        switch try await caller.credential(reading: "collection \(collection)") {
        case nil: throw TokenRefusal.missing("collection \(collection)")
        case .owner?: return .everything
        case .client?: throw Problem.clientMayNotRead(collection)
        case .user(let claims)?: return try userScope(of: collection, for: claims)
        }
    }

    /// The rule `claims` reads restricted `collection` under: `403 not-readable` when the rules
    /// give users no reads of it (`false`, or a collection they do not name).
    func userScope(of collection: CollectionName, for claims: Claims) throws -> Scope {
        guard case .when(let filter)? = rules?.rules.rule(for: collection)?.read else {
            throw Problem(.forbidden, "not-readable", "collection \(collection): the rules give users no reads of it")
        }
        return .rule(filter, claims)
    }

    /// The mark a user's token of `collection` carries: their binding (the claims the read rule
    /// reads) and the rules version; nil when the rules give users no reads of it.
    func userMark(of collection: CollectionName, for claims: Claims) -> UserMark? {
        guard let stored = rules, let rule = stored.rules.rule(for: collection), case .when = rule.read else { return nil }
        return UserMark(binding: claims.binding(reading: rule.readClaims), rulesVersion: stored.version)
    }

    /// Why a token marked `mark` cannot be answered from for `claims`' read of `collection`
    /// with the selection `fingerprint`, or nil when it was issued to exactly that user, under
    /// these rules, for that selection: the check a user's delta and a user's early `304` make alike.
    func refusal(of mark: SelectionMark?, for claims: Claims, reading collection: CollectionName, fingerprint: String) -> TokenRejection? {
        guard let mark, let issued = mark.user, let expected = userMark(of: collection, for: claims) else { return .userChanged }
        guard issued.rulesVersion == expected.rulesVersion else { return .rulesChanged }
        guard issued.binding == expected.binding else { return .userChanged }
        guard mark.fingerprint == fingerprint else { return .selectionChanged }
        return nil
    }
}

extension ServerConfiguration {
    /// The read policy of the rules this configuration holds (pinned for a request).
    var readPolicy: ReadPolicy { ReadPolicy(rules: rules) }
}

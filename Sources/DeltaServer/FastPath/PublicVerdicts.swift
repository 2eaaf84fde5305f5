import DeltaCore
import DeltaStore

/// The early verdicts of the public collections only: under rules, a read of a restricted
/// collection depends on who asks, so only the router (which verifies the user's token and
/// checks the token's user binding) may answer it, `304`s included.
struct PublicVerdicts: EarlyVerdicts {
    let store: any EarlyVerdicts
    /// The rules as they are at each request (they may change while the server runs).
    let rules: LiveRules

    func earlyVerdict(_ collection: CollectionName, since: Since) -> EarlyVerdict {
        rules.isPublic(collection) ? store.earlyVerdict(collection, since: since) : .unknown
    }
}

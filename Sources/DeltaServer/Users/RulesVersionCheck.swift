import DeltaStore
import HTTPTypes
import Hummingbird

extension StoredRules {
    /// Refuses to answer from these rules when the database holds another version (it changed
    /// after the request began, or another instance started with another rules file): never two
    /// truths. The request is then decided again under the database's rules (`RulesPinned`), or,
    /// on a server that does not follow them, answered `503 rules-mismatch`.
    func check(_ source: any RuleSource) throws {
        guard source.rulesVersion == version else { throw RulesMoved(held: version, found: source.rulesVersion) }
    }
}

/// A read transaction found the database under another rules version than the one its request
/// is decided under.
struct RulesMoved: Error, CustomStringConvertible {
    /// The version the request was decided under.
    let held: UInt64
    /// The version the database holds.
    let found: UInt64

    /// What the server answers when it cannot decide the request again under the database's
    /// rules: `503 rules-mismatch`, which the client may retry at once.
    var problem: Problem {
        Problem(
            .serviceUnavailable, "rules-mismatch",
            "rules: this server holds version \(held) but the database holds version \(found) (another instance started with another rules file); "
                + "a server that follows the database (deltasnap serve with users) takes the new version within a second, another one needs a restart",
            headers: [.retryAfter: "1"])
    }

    var description: String { "rules: version \(held) held, \(found) in the database" }
}

/// A route that decides each request under one version of the rules: its copy of the
/// configuration has `rules` pinned for the request (`ServerConfiguration.pinned`).
protocol RulesPinned: Sendable {
    /// The route's configuration; `rules` is the version a request is decided under.
    var configuration: ServerConfiguration { get set }
}

extension RulesPinned {
    /// This route with the rules its configuration follows pinned as they are now: what one
    /// request runs on, from its start to its end.
    func pinned() -> Self {
        guard configuration.liveRules != nil else { return self }
        var route = self
        route.configuration = configuration.pinned()
        return route
    }

    /// Answers a read with `answer` run on this route pinned to the rules held now. When the
    /// read's transaction found the database under another version (`RulesMoved`), the rules are
    /// read from the database at once and the whole read is answered again under them; should
    /// that happen twice, or on a server that does not follow the database's rules, the answer is
    /// `503 rules-mismatch`. Only for requests without a body: a body is read once.
    func underOneVersion(_ store: any ChangeReader, _ answer: (Self) async throws -> Response) async throws -> Response {
        let route = pinned()
        do {
            return try await answer(route)
        } catch let moved as RulesMoved {
            guard let newer = try await route.configuration.repinned(store) else { throw moved.problem }
            var again = route
            again.configuration = newer
            do {
                return try await answer(again)
            } catch let twice as RulesMoved {
                throw twice.problem
            }
        }
    }

    /// Runs `decide` under the rules this route is pinned to; when its write transaction found the
    /// database under another version (`StoreError` `rulesMismatch`, nothing applied), runs it
    /// once more under the database's rules, read at once: a write is decided under one version,
    /// the newest when they changed. A second mismatch, or one on a server that does not follow
    /// the database's rules, is the store's error (`503 rules-mismatch`).
    func decidingAgainOnNewerRules<T>(_ store: any ChangeReader, _ decide: (ServerConfiguration) async throws -> T) async throws -> T {
        do {
            return try await decide(configuration)
        } catch let error as StoreError where error.kind == .rulesMismatch {
            guard let newer = try await configuration.repinned(store) else { throw error }
            return try await decide(newer)
        }
    }
}

import ArgumentParser
import DeltaCore
import DeltaRules
import DeltaServer
import DeltaStore
import Foundation

/// `deltasnap serve`'s options for users: how their tokens are verified, and the rules file.
struct UserOptions: ParsableArguments {
    @Option(
        help: ArgumentHelp(
            "The shared secret HS256 user tokens are signed with (default: $DELTASNAP_JWT_SECRET; at least 32 bytes). For development and for backends that mint their own.",
            valueName: "secret"))
    var jwtSecret: String?

    @Option(
        help: ArgumentHelp(
            "A JWK Set (file or https URL) with the public keys of ES256, EdDSA and RS256 user tokens. A file is re-read when it changes (looked at once a second); a URL is fetched again, at most every --jwks-refresh, while tokens are used. A set that cannot be read is logged and the last good one stays in force.",
            valueName: "file|url"))
    var jwks: String?

    @Option(
        help: ArgumentHelp(
            "With a --jwks URL: how often it is fetched again while tokens are used, 1s to 1h, e.g. 1s or 30s. A key the identity provider removes stops working within this time (every token verified with it included); 1s meets a one-second revocation at the cost of one fetch a second per instance.",
            valueName: "duration"))
    var jwksRefresh = "30s"

    @Option(help: ArgumentHelp("The \"iss\" every user token must carry.", valueName: "issuer"))
    var jwtIssuer: String?

    @Option(help: ArgumentHelp("An audience every user token's \"aud\" must name.", valueName: "audience"))
    var jwtAudience: String?

    @Option(
        help: ArgumentHelp(
            "The rules file: per collection, what each user may read and write (docs/PROTOCOL.md, \"Users and rules\"). Collections it does not name are the owner's alone. Check one with `deltasnap rules check`. Installed in the database when it differs from the rules there; the server then follows the database's rules (`deltasnap rules install`). Without it, a server that verifies users follows the rules the database holds.",
            valueName: "file"))
    var rules: String?

    @Option(
        help: ArgumentHelp(
            "With --cacheable-reads: how long a user's cacheable read stays valid (between this and twice this), e.g. 15m or 1h. Users whose rule gives the same rows share its URL, so a cache in front computes their answer once.",
            valueName: "duration"))
    var grantTtl = "1h"

    /// The HS256 secret from the option or the environment.
    var resolvedSecret: String? {
        jwtSecret ?? ProcessInfo.processInfo.environment["DELTASNAP_JWT_SECRET"].flatMap { $0.isEmpty ? nil : $0 }
    }

    func validate() throws {
        if let secret = resolvedSecret, secret.utf8.count < 32 {
            throw ValidationError("--jwt-secret must be at least 32 bytes (RFC 7518 §3.2: a key as long as the HMAC's output)")
        }
        if rules != nil, resolvedSecret == nil, jwks == nil {
            throw ValidationError("--rules needs a way to verify users' tokens: --jwks, --jwt-secret (or DELTASNAP_JWT_SECRET), or both")
        }
        guard let refresh = TokenCommand.seconds(jwksRefresh), (1...3600).contains(refresh) else {
            throw ValidationError("--jwks-refresh: not a duration from 1 s to 1 h like 1s, 30s or 5m (got \(jwksRefresh))")
        }
        guard let seconds = TokenCommand.seconds(grantTtl), (60...604_800).contains(seconds) else {
            throw ValidationError("--grant-ttl: not a duration from 60 s to 7 d like 900, 15m or 1h (got \(grantTtl))")
        }
    }

    /// Sets the authenticator and the rules on `configuration`, installing the rules in `store`
    /// (a file that differs from the database's rules becomes their next version), or, without
    /// `--rules`, taking the ones it holds (`deltasnap rules install`); either way the server then
    /// follows the database's rules as they change (`LiveRules`). Returns a summary for the start
    /// line, nil without users.
    func apply(to configuration: inout ServerConfiguration, store: any ChangeReader & StoreAdministration) async throws -> String? {
        let stored: StoredRules
        if let path = rules {
            let parsed = try RulesFile.read(path)
            stored = StoredRules(version: try await store.installRules(parsed), rules: parsed)
        } else if resolvedSecret != nil || jwks != nil {
            guard let held = try await store.currentRules() else {
                throw CommandFailure(
                    "user tokens need rules: give --rules FILE, or install them first with deltasnap rules install (a collection the rules do not name is the owner's alone)"
                )
            }
            try await store.followRules(held.rules)
            stored = held
        } else {
            return nil
        }
        let version = stored.version
        configuration.rules = stored
        configuration.liveRules = LiveRules(stored)
        configuration.authenticator = try await Authenticator(
            secret: resolvedSecret, jwks: jwks.map(JWKSLocation.init), issuer: jwtIssuer, audience: jwtAudience,
            refetchAfter: TimeInterval(TokenCommand.seconds(jwksRefresh) ?? 30))
        if configuration.cacheableReads {
            configuration.readGrants = ReadGrants(key: try await store.grantKey(), lifetime: UInt64(TokenCommand.seconds(grantTtl) ?? 3600))
        }
        return "users under rules version \(version)"
    }
}

/// Reading a rules file, with errors that name the file and the place in it.
enum RulesFile {
    /// The rules in the file at `path`. A file that cannot be read or is not valid rules is a
    /// `CommandFailure` (one line, exit status 1), not a `ValidationError`: the command line was
    /// right, the file is wrong, so no usage line follows (and no exit status 64).
    static func read(_ path: String) throws -> Rules {
        guard let data = FileManager.default.contents(atPath: path) else { throw CommandFailure("rules \(path): cannot be read") }
        do {
            return try Rules(parsing: Array(data))
        } catch let error as WireError {
            throw CommandFailure("\(path): \(error)")
        }
    }
}

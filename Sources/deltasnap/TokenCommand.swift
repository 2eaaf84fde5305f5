import ArgumentParser
import DeltaCore
import DeltaServer
import Foundation

/// `deltasnap token`: an HS256 user token for development and for trying the rules with curl.
struct TokenCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "token",
        abstract: "Print an HS256 user token (JSON Web Token) for development.",
        discussion: """
            Signs the claims with the secret the server verifies HS256 tokens with (--jwt-secret \
            or DELTASNAP_JWT_SECRET on both sides), so you can try rules with curl:
              export DELTASNAP_JWT_SECRET=$(openssl rand -hex 32)
              deltasnap token --sub ada --claim 'teams=["red"]' --ttl 1h
              curl -H "Authorization: Bearer $(deltasnap token --sub ada)" http://127.0.0.1:8080/api/notes

            Production apps get tokens from their identity provider (verified with --jwks) or from \
            a backend that holds the secret: this command is not a way to issue real sessions.
            """
    )

    @Option(help: ArgumentHelp("The shared secret (default: $DELTASNAP_JWT_SECRET; at least 32 bytes).", valueName: "secret"))
    var secret: String?

    @Option(help: ArgumentHelp("The user: the token's \"sub\".", valueName: "user"))
    var sub: String

    @Option(
        name: .customLong("claim"), help: ArgumentHelp("Another claim, as NAME=JSON (e.g. teams='[\"red\"]', admin=true); repeatable.", valueName: "name=json"))
    var claims: [String] = []

    @Option(help: ArgumentHelp("How long the token is valid: seconds, or a number with s, m, h or d (default 1h).", valueName: "duration"))
    var ttl = "1h"

    @Option(help: ArgumentHelp("The \"iss\" claim, for a server started with --jwt-issuer.", valueName: "issuer"))
    var issuer: String?

    @Option(help: ArgumentHelp("The \"aud\" claim, for a server started with --jwt-audience.", valueName: "audience"))
    var audience: String?

    func run() async throws {
        guard let secret = secret ?? ProcessInfo.processInfo.environment["DELTASNAP_JWT_SECRET"].flatMap({ $0.isEmpty ? nil : $0 }) else {
            throw ValidationError("token: give --secret or set DELTASNAP_JWT_SECRET (the server's HS256 secret)")
        }
        guard secret.utf8.count >= 32 else { throw ValidationError("--secret must be at least 32 bytes, as the server requires") }
        guard !sub.isEmpty else { throw ValidationError("--sub must not be empty: it names the user") }
        guard let seconds = Self.seconds(ttl), seconds > 0 else { throw ValidationError("--ttl: not a duration like 3600, 90s, 15m, 1h or 7d (got \(ttl))") }
        let now = Int64(Date().timeIntervalSince1970)
        var members: [String: JSONValue] = ["sub": .string(sub), "iat": .number(String(now)), "exp": .number(String(now + seconds))]
        if let issuer { members["iss"] = .string(issuer) }
        if let audience { members["aud"] = .string(audience) }
        for claim in claims {
            let parts = claim.split(separator: "=", maxSplits: 1)
            guard parts.count == 2, !parts[0].isEmpty else { throw ValidationError("--claim: use NAME=JSON (got \(claim))") }
            guard let value = try? JSONValue(parsing: Array(parts[1].utf8)) else {
                throw ValidationError("--claim \(parts[0]): not JSON (a string needs quotes: \(parts[0])='\"text\"')")
            }
            guard !["sub", "exp", "iat"].contains(String(parts[0])) else { throw ValidationError("--claim: \(parts[0]) is set by --sub and --ttl") }
            members[String(parts[0])] = value
        }
        let object = JSONValue.object(members.sorted { $0.key.utf8.lexicographicallyPrecedes($1.key.utf8) }.map { JSONMember(key: $0.key, value: $0.value) })
        print(try await DevelopmentToken.sign(object, secret: secret))
    }

    /// Seconds in `text`: a number, optionally followed by s, m, h or d.
    static func seconds(_ text: String) -> Int64? {
        let units: [Character: Int64] = ["s": 1, "m": 60, "h": 3600, "d": 86400]
        if let unit = text.last, let factor = units[unit], let number = Int64(text.dropLast()) { return number * factor }
        return Int64(text)
    }
}

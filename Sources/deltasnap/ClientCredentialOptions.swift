import ArgumentParser
import DeltaClient
import Foundation

/// The credentials a replica's commands (`sync`, `blob`) present: the apps' client key, and a
/// user's token given inline, in the environment, or in a file (not visible to other users of
/// the machine the way a command line is).
struct ClientCredentialOptions: ParsableArguments {
    @Option(help: ArgumentHelp("The key the server gives apps for pushes (default: $DELTASNAP_CLIENT_KEY).", valueName: "key"))
    var clientKey: String?

    @Option(
        help: ArgumentHelp(
            "The user's JSON Web Token, for a server with rules (default: $DELTASNAP_TOKEN). Other users of the machine can see a command line: prefer --token-file or the environment.",
            valueName: "jwt"))
    var token: String?

    @Option(help: ArgumentHelp("A file holding the user's token (read at each request that needs it: a token rotated there is used).", valueName: "file"))
    var tokenFile: String?

    func validate() throws {
        if token != nil && tokenFile != nil { throw ValidationError("give --token or --token-file, not both") }
    }

    /// The client key from the option or the environment.
    var resolvedClientKey: String? {
        clientKey ?? ProcessInfo.processInfo.environment["DELTASNAP_CLIENT_KEY"].flatMap { $0.isEmpty ? nil : $0 }
    }

    /// Sets `configuration`'s client key and credentials closure.
    func apply(to configuration: inout ReplicaConfiguration) {
        configuration.clientKey = resolvedClientKey
        if let tokenFile {
            configuration.credentials = {
                guard let data = FileManager.default.contents(atPath: tokenFile) else { throw CommandFailure("--token-file \(tokenFile): cannot be read") }
                return String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
            }
        } else if let text = token ?? ProcessInfo.processInfo.environment["DELTASNAP_TOKEN"].flatMap({ $0.isEmpty ? nil : $0 }) {
            configuration.credentials = { text }
        }
    }
}

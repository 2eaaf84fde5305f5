import DeltaCore
import DeltaSQLite
import Foundation

/// The signed-in user's token (docs/PROTOCOL.md, "Users and rules"), from the app's
/// `ReplicaConfiguration.credentials`: asked before the first request that needs it, kept, and
/// asked again after the server answers `401 token-expired`.
final class Credentials: Sendable {
    private let source: @Sendable () async throws -> String?
    private let kept = Locked<String?>(nil)

    init(_ source: @escaping @Sendable () async throws -> String?) {
        self.source = source
    }

    /// The current token; with `refreshing`, a new one from the app. nil: nobody is signed in.
    func token(refreshing: Bool) async throws -> String? {
        if !refreshing, let token = kept.withLock({ $0 }) { return token }
        let token: String?
        do { token = try await source() } catch { throw ReplicaError(.configuration, "the app's credentials failed", evidence: "\(error)") }
        kept.withLock { $0 = token }
        return token
    }

    /// Forgets the kept token (at sign-out).
    func forget() { kept.withLock { $0 = nil } }

    /// The `sub` claim of a JSON Web Token, read without verifying it (the server verifies):
    /// which user a token names. nil when it is not a JWT with a string `sub`.
    static func subject(of token: String) -> String? {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3 else { return nil }
        var text = parts[1].replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        text += String(repeating: "=", count: (4 - text.count % 4) % 4)
        guard let data = Data(base64Encoded: text), case .string(let sub)? = (try? JSONValue(parsing: Array(data)))?["sub"] else { return nil }
        return sub
    }
}

import DeltaCore
import Foundation

extension Posted {
    /// Whether the server refused the user's token because it expired (`401 token-expired`).
    var isTokenExpired: Bool { status == 401 && String(decoding: body.prefix(300), as: UTF8.self).contains("token-expired") }
}

extension Replica {
    /// Runs `request` with the replica's credential (the signed-in user's token, else the client
    /// key), and once more with a token the app renews when the server answers `401
    /// token-expired`: what every push, blob upload and blob download does.
    func withCredential(_ request: (String?) async throws -> Posted) async throws -> Posted {
        let answer = try await request(try await fetcher.credentials?.token(refreshing: false) ?? configuration.clientKey)
        guard answer.isTokenExpired, let credentials = fetcher.credentials else { return answer }
        return try await request(try await credentials.token(refreshing: true))
    }
}

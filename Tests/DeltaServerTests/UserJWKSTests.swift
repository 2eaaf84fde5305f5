import DeltaCore
import DeltaSQLite
import DeltaStore
import DeltaTestSupport
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Testing

@testable import DeltaServer

@Suite("A JWK Set served over HTTP: fetched at start, fetched again for an unknown kid, at most once per interval")
struct UserJWKSTests {
    /// The least time between two fetches of the URL in this test (30 s in production).
    static let interval: TimeInterval = 2

    @Test(
        "Keys rotate on the identity provider while users sync: new tokens verify after one fetch, a storm of unknown kids costs one fetch",
        arguments: Backend.available)
    func rotation(backend: Backend) async throws {
        let first = try await TestKeys.make()
        let second = try await TestKeys.make()
        let served = Locked(try first.jwks())
        let fetches = Locked(0)
        let router = Router()
        router.get("jwks.json") { _, _ -> String in
            fetches.withLock { $0 += 1 }
            return served.withLock { $0 }
        }
        let provider = Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)))
        try await provider.test(.live) { idp in
            let url = URL(string: "http://127.0.0.1:\(idp.port!)/jwks.json")!
            try await backend.withStore { store, _ in
                var configuration = ServerConfiguration()
                configuration.port = 0
                configuration.writeToken = secret
                let rules = try Rules(parsing: Array(UserTokenTests.rules.utf8))
                configuration.rules = StoredRules(version: try await store.installRules(rules), rules: rules)
                configuration.authenticator = try await Authenticator(secret: nil, jwks: .url(url), issuer: nil, audience: nil, refetchAfter: Self.interval)
                #expect(fetches.withLock { $0 } == 1)  // at start
                let app = buildApplication(store: store, earlyVerdicts: store, configuration: configuration)
                try await app.test(.live) { client in
                    _ = try await client.write(.post, "/api/notes", #"[{"id":"a1","owner":"ada"}]"#)
                    for algorithm in ["ES256", "EdDSA", "RS256"] {
                        #expect(try await client.get("/api/notes", as: try await Mint.signed(algorithm, first, "ada")).status == .ok)
                    }
                    // The provider publishes new keys; tokens signed with them arrive.
                    served.withLock { $0 = (try? second.jwks(suffix: "-2")) ?? "" }
                    try await Task.sleep(for: .milliseconds(Int(Self.interval * 1000) + 100))
                    let rotated = try await Mint.signed("ES256", second, "ada", suffix: "-2")
                    #expect(try await client.get("/api/notes", as: rotated).status == .ok)
                    #expect(fetches.withLock { $0 } == 2)
                    // A storm of tokens naming unknown keys: refused, and the provider asked at most once per interval.
                    let started = Date()
                    for index in 0..<20 {
                        let unknown = try await Mint.signed("ES256", second, "ada", kid: "nope-\(index)")
                        #expect(try await client.get("/api/notes", as: unknown).text.contains("token-key-unknown"))
                    }
                    let allowed = 2 + Int(Date().timeIntervalSince(started) / Self.interval) + 1
                    #expect(fetches.withLock { $0 } <= allowed, "\(fetches.withLock { $0 }) fetches in \(Date().timeIntervalSince(started)) s")
                    // Verified tokens are kept: the first key's tokens, verified before, still pass from the cache.
                }
            }
        }
    }
}

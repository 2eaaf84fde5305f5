import DeltaCore
import DeltaRules
import DeltaSQLite
import DeltaStore
import DeltaTestSupport
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Testing

@testable import DeltaServer

@Suite("A JWK Set served over HTTP: fetched at start, fetched again for an unknown kid or while tokens are used, at most once per interval")
struct UserJWKSTests {
    /// The least time between two fetches of the URL in this test (30 s in production).
    static let interval: TimeInterval = 2

    @Test(
        "Keys rotate on the identity provider while users sync: new tokens verify after one fetch, old ones stop, a storm of unknown kids costs one fetch, a broken set changes nothing",
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
        try await provider.testOnServerThreads(.live) { idp in
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
                try await app.testOnServerThreads(.live) { client in
                    _ = try await client.write(.post, "/api/notes", #"[{"id":"a1","owner":"ada"}]"#)
                    var before: [String] = []
                    for algorithm in ["ES256", "EdDSA", "RS256"] {
                        before.append(try await Mint.signed(algorithm, first, "ada"))
                        #expect(try await client.get("/api/notes", as: before.last).status == .ok)
                    }
                    // The provider publishes new keys; tokens signed with them arrive.
                    served.withLock { $0 = (try? second.jwks(suffix: "-2")) ?? "" }
                    try await Task.sleep(for: .milliseconds(Int(Self.interval * 1000) + 100))
                    let rotated = try await Mint.signed("ES256", second, "ada", suffix: "-2")
                    // One fetch, the one the unknown kid waits for (another may have run in the
                    // background before, on a machine slow enough to use the set past the interval).
                    let fetched = fetches.withLock { $0 }
                    #expect(try await client.get("/api/notes", as: rotated).status == .ok)
                    #expect(fetches.withLock { $0 } == fetched + 1)
                    // A storm of tokens naming unknown keys: refused, and the provider asked at most once per interval.
                    let started = Date()
                    for index in 0..<20 {
                        let unknown = try await Mint.signed("ES256", second, "ada", kid: "nope-\(index)")
                        #expect(try await client.get("/api/notes", as: unknown).text.contains("token-key-unknown"))
                    }
                    let allowed = fetched + 1 + Int(Date().timeIntervalSince(started) / Self.interval) + 1
                    #expect(fetches.withLock { $0 } <= allowed, "\(fetches.withLock { $0 }) fetches in \(Date().timeIntervalSince(started)) s")
                    // The first keys left the set with that fetch: their tokens, verified and kept before, are refused.
                    for token in before {
                        let refused = try await client.get("/api/notes", as: token)
                        #expect(refused.status == .unauthorized && refused.text.contains("token-key-unknown"), "\(refused.text)")
                    }
                    // The provider serves a broken set: fetched in the background once due, it changes
                    // nothing (the last good set stays in force) and is counted.
                    served.withLock { $0 = #"{"keys":[{"kty":"EC""# }
                    try await Task.sleep(for: .milliseconds(Int(Self.interval * 1000) + 100))
                    #expect(try await client.get("/api/notes", as: rotated).status == .ok)
                    let deadline = ContinuousClock.now + .seconds(10)
                    while try await client.metric("deltasnap_jwks_failures_total") == 0, ContinuousClock.now < deadline {
                        try await Task.sleep(for: .milliseconds(50))
                    }
                    #expect(try await client.metric("deltasnap_jwks_failures_total") == 1)
                    #expect(try await client.get("/api/notes", as: rotated).status == .ok)
                }
            }
        }
    }
}

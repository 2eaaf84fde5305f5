import DeltaClient
import DeltaCore
import DeltaSQLite
import DeltaSQLiteStore
import DeltaServer
import DeltaStore
import DeltaTestSupport
import Foundation
import Testing

/// The sign-out half of the isolation model (docs/SECURITY.md): one install, users taking turns
/// on it at random, the owner writing, moving and hiding their notes between turns, with and
/// without granted cacheable reads. After every sync the install holds exactly the signed-in
/// user's notes (a reference computed here from the owner's view of the server); after every
/// sign-out it holds none, reopened offline too, while the public airports stay.
@Suite("Isolation across sign-outs, model-based: nothing of a signed-out user stays readable on the install")
struct SignOutIsolationTests {
    static let users = ["u0", "u1", "u2"]
    /// Turns per run (DELTASNAP_ISOLATION_ROUNDS, as the server's model test).
    static let turns = ProcessInfo.processInfo.environment["DELTASNAP_ISOLATION_ROUNDS"].flatMap { Int($0) } ?? 12

    @Test("Users take turns on one install; each sync holds exactly the user's notes; each sign-out leaves none", arguments: [false, true])
    func randomized(grants: Bool) async throws {
        let seed = SeededGenerator.seed(for: "SignOutIsolationTests.randomized(grants: \(grants))")
        try await withUserHarness(grants: grants) { harness in
            var random = SeededGenerator(seed: seed)
            try await harness.put("airports", #"{"id":"p1","name":"Paris"}"#)
            try await harness.put("notes", #"{"id":"n0","owner":"u0","text":"first"}"#)
            let snapshot = try await harness.bake()
            let signedIn = Locked<String?>(nil)
            let configuration = harness.configuration("install", snapshot: snapshot) {
                guard let user = signedIn.withLock({ $0 }) else { return nil }
                return try await UserHarness.token(user)
            }
            let replica = try await Replica.open(configuration)
            var checks = 0
            for turn in 0..<Self.turns {
                let context = "seed \(seed) turn \(turn) (grants: \(grants))"
                for _ in 0..<Int.random(in: 1...4, using: &random) {
                    let id = "n\(Int.random(in: 0..<6, using: &random))"
                    let owner = Self.users.randomElement(using: &random)!
                    if Int.random(in: 0..<4, using: &random) == 0, try await harness.notes()[id] != nil {
                        _ = try await harness.store.write(to: try CollectionName("notes")) { _ = try await $0.hide(id: id) }
                    } else {
                        try await harness.put("notes", #"{"id":"\#(id)","owner":"\#(owner)","text":"t\#(UInt32.random(in: 0...UInt32.max, using: &random))"}"#)
                    }
                }
                let user = Self.users.randomElement(using: &random)!
                signedIn.withLock { $0 = user }
                _ = try await replica.sync()
                let expected = try await harness.notes().filter { $0.value.contains(#""owner":"\#(user)""#) }
                #expect(try await replica.records("notes") == expected, "\(context): \(user)'s notes")
                if Bool.random(using: &random) {
                    try await replica.put(try Record(parsing: Array(#"{"id":"w\#(turn)","text":"mine"}"#.utf8)), in: "notes")
                    if Bool.random(using: &random) { _ = try await replica.sync() }
                }
                try await replica.signOut(discardingPendingWrites: true)
                signedIn.withLock { $0 = nil }
                #expect(try await replica.records("notes").isEmpty, "\(context): \(user)'s notes stayed after their sign-out")
                #expect(try await replica.records("airports").keys.sorted() == ["p1"], "\(context)")
                var offline = configuration
                offline.credentials = nil
                let reopened = try await Replica.open(offline)
                #expect(try await reopened.records("notes").isEmpty, "\(context): reopened offline, \(user)'s notes are there")
                checks += 4
            }
            print("SignOutIsolationTests.randomized(grants: \(grants)): seed \(seed), \(Self.turns) turns, \(checks) checks; findings: 0 unless reported above")
        }
    }
}

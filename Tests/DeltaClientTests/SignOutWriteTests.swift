import DeltaCore
import DeltaTestSupport
import Foundation
import Testing

@testable import DeltaClient

@Suite("Writes during a sign-out")
struct SignOutWriteTests {
    @Test("While a sign-out is under way the outbox refuses the app's writes (put, delete, resolve, discard) under its own lock; after it, they go on")
    func refusedDuringSignOut() async throws {
        try await withHarness { harness in
            try await harness.put(#"{"id":"a"}"#)
            let replica = try await Replica.open(harness.configuration(snapshot: try await harness.bake("v1")))
            // What `signOut` does first, before it checks for unsettled writes and discards them.
            replica.outbox.signOut(true)
            let writes: [@Sendable () async throws -> Void] = [
                { try await replica.put(try record(#"{"id":"mine"}"#), in: items) },
                { try await replica.delete("a", in: items) },
                { try await replica.resolve("a", in: items, .keepServer) },
            ]
            for write in writes {
                let refused = await #expect(throws: ReplicaError.self) { try await write() }
                #expect(refused?.description.hasPrefix("configuration: the replica is signing out; the write was not kept") == true)
            }
            #expect(try await replica.state(of: "mine", in: items) == .synced)
            #expect(try replica.outbox.unsettled() == nil)
            replica.outbox.signOut(false)
            try await replica.put(try record(#"{"id":"mine"}"#), in: items)
            #expect(try await replica.state(of: "mine", in: items) == .pending)
            // A real sign-out refuses them for its whole length, and lets them go on after it.
            try await replica.signOut(discardingPendingWrites: true)
            try await replica.put(try record(#"{"id":"after"}"#), in: items)
            #expect(try await replica.state(of: "after", in: items) == .pending)
        }
    }
}

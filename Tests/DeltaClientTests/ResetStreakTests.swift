import DeltaClient
import DeltaCore
import DeltaSQLite
import DeltaTestSupport
import Foundation
import Testing

@Suite("Replica: no reset loops")
struct ResetStreakTests {
    /// A cache that keeps serving wrong bytes: valid JSON, a changed value.
    static let wrong: @Sendable (String) -> String = { $0.replacingOccurrences(of: #""v":1"#, with: #""v":2"#) }

    @Test(
        "a reset for the same reason soon after another waits for the back-off: the data stays, the event and the report say until when, nothing is downloaded; after the back-off it resets, and a clean delta ends the streak"
    )
    func resetLoopBacksOff() async throws {
        try await withHarness { harness in
            try await harness.putMany((0..<10).map { #"{"id":"r\#($0)","v":0}"# })
            let snapshot = try await harness.bake("v0")
            var configuration = harness.configuration("looping", snapshot: snapshot, viaProxy: true)
            configuration.initialBackoff = 60
            let replica = try await Replica.open(configuration)
            try await harness.put(#"{"id":"r1","v":1}"#)
            harness.proxy.plan(.rewrite(Self.wrong))
            let beforeFirst = Date()
            let first = try await replica.sync()
            let afterFirst = Date()
            guard case .digestMismatch = first.collections.first?.reset else {
                Issue.record("the first wrong answer did not reset: \(String(describing: first.collections.first))")
                return
            }
            await #expect(try replica.contents() == (try await harness.serverRecords()))

            // The same failure again, at once: no second reset, no download, the data kept.
            try await harness.put(#"{"id":"r2","v":1}"#)
            let held = try await replica.contents()
            let answersBefore = harness.proxy.bodies.count
            let events = replica.events()
            harness.proxy.plan(.rewrite(Self.wrong))
            let second = try await replica.sync()
            guard case .resetDeferred(.digestMismatch, let until) = second.collections.first?.outcome else {
                Issue.record("the repeated failure was not deferred: \(String(describing: second.collections.first))")
                return
            }
            // The back-off's first step (60 s) from the first reset, however long the steps between
            // took (this machine sometimes pauses for longer than a minute).
            #expect(until >= beforeFirst.addingTimeInterval(60) && until <= afterFirst.addingTimeInterval(60), "deferred by the back-off's first step (60 s)")
            #expect(second.collections.first?.reset == nil)
            #expect(!second.changedData)
            await #expect(try replica.contents() == held)
            #expect(harness.proxy.bodies.count == answersBefore + 1, "one answer, then neither the snapshot's delta nor the full dataset")
            var seen: [SyncEvent] = []
            for await event in events {
                seen.append(event)
                if case .finished = event { break }
            }
            guard seen.count == 3, case .resetDeferred(items, .digestMismatch, let said) = seen[1], said == until else {
                Issue.record("expected started, resetDeferred, finished; got \(seen)")
                return
            }

            // Once the back-off has passed (moved into the past here), the reset happens.
            let store = try Connection(path: configuration.storeURL.path)
            let streak = try #require(try store.text("SELECT value FROM sync_state WHERE key = 'reset:items'"))
            #expect(streak.hasSuffix(" 1 digest-mismatch"), "\(streak)")
            try store.statement("UPDATE sync_state SET value = ? WHERE key = 'reset:items'")
                .run(.text("\(Date().timeIntervalSince1970 - 61) 1 digest-mismatch"))
            harness.proxy.plan(.rewrite(Self.wrong))
            let third = try await replica.sync()
            guard case .digestMismatch = third.collections.first?.reset else {
                Issue.record("after the back-off the reset did not happen: \(String(describing: third.collections.first))")
                return
            }
            await #expect(try replica.contents() == (try await harness.serverRecords()))
            #expect(try store.text("SELECT value FROM sync_state WHERE key = 'reset:items'")?.hasSuffix(" 2 digest-mismatch") == true)

            // A delta that applies cleanly ends the streak.
            try await harness.put(#"{"id":"r3","v":5}"#)
            let fourth = try await replica.sync()
            #expect(fourth.collections.first?.outcome == .applied(upserted: 1, hidden: 0))
            #expect(try store.text("SELECT value FROM sync_state WHERE key = 'reset:items'") == nil)
        }
    }
}

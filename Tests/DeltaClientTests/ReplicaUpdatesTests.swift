import DeltaClient
import DeltaCore
import DeltaSQLite
import DeltaTestSupport
import Foundation
import Testing

@Suite("Replica: live updates")
struct ReplicaUpdatesTests {
    @Test("updates() syncs at once, then again within about a second of each commit, and stops when its task is cancelled")
    func liveUpdates() async throws {
        try await withHarness { harness in
            try await harness.put(#"{"id":"a","n":1}"#)
            let replica = try await Replica.open(harness.configuration(snapshot: try await harness.bake("v1")))
            let reports = Locked<[(SyncReport, ContinuousClock.Instant)]>([])
            let listener = Task {
                for try await report in replica.updates(wait: liveWait) { reports.withLock { $0.append((report, .now)) } }
            }
            func waitFor(_ count: Int) async throws {
                for _ in 0..<(Int(wakeBound / .milliseconds(50)) + 100) where reports.withLock({ $0.count }) < count {
                    try await Task.sleep(for: .milliseconds(50))
                }
            }
            try await waitFor(1)
            #expect(reports.withLock { $0.first?.0.collections.first?.outcome } == .notModified)
            for round in 1...2 {
                try await Task.sleep(for: .milliseconds(400))  // the probe is waiting on the server by now
                // Timed from the commit's answer: the commit's own fsync can take seconds on a loaded machine.
                try await harness.put(#"{"id":"b","n":\#(round)}"#)
                let committed = ContinuousClock.now
                try await waitFor(round + 1)
                let (report, at) = try #require(reports.withLock { $0.count > round ? $0[round] : nil }, "round \(round): no report after the commit")
                #expect(report.collections.first?.outcome == .applied(upserted: 1, hidden: 0))
                print("live updates within 1 s: ReplicaUpdatesTests: round \(round) synced \(at - committed) after the commit")
                #expect(at - committed < wakeBound + .milliseconds(500), "round \(round): synced \(at - committed) after the commit")
            }
            await #expect(try replica.contents() == (try await harness.serverRecords()))
            listener.cancel()
            _ = await listener.result
            let count = reports.withLock { $0.count }
            try await harness.put(#"{"id":"c"}"#)
            try await Task.sleep(for: .milliseconds(800))
            #expect(reports.withLock { $0.count } == count, "no sync after the task was cancelled")
        }
    }
}

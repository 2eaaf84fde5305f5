import DeltaClient
import DeltaCore
import DeltaSQLite
import DeltaTestSupport
import Foundation
import Testing

@Suite("Replica: reads in parallel")
struct ReaderPoolTests {
    /// Waits on `semaphore` off the cooperative pool.
    static func wait(_ semaphore: DispatchSemaphore) async {
        _ = try? await offThePool { semaphore.wait() }
    }

    @Test("reads answer while two others are still open (each on a connection of its own); a sign-out afterwards empties the logs")
    func readsDoNotQueue() async throws {
        try await withHarness { harness in
            try await harness.put(#"{"id":"a","n":1}"#, #"{"id":"b","n":2}"#, #"{"id":"c","n":3}"#)
            var configuration = harness.configuration(snapshot: try await harness.bake("v1"))
            configuration.indexes = [items: ["n"]]
            let replica = try await Replica.open(configuration)
            let (entered, release) = (DispatchSemaphore(value: 0), DispatchSemaphore(value: 0))
            // Two reads held open inside their transactions, so two connections are busy.
            let held = (0..<2).map { _ in
                Task {
                    try await replica.forEachRecord(in: items) { record in
                        if record.id == "a" {
                            entered.signal()
                            release.wait()
                        }
                    }
                }
            }
            await Self.wait(entered)
            await Self.wait(entered)
            // With one connection for every read these would wait for `release`, which comes
            // only after them or after 30 s; they must answer at once.
            let answered = Locked([String]())
            let readers = Task {
                let count = try await replica.count(in: items)
                let first = try await replica.query(RecordQuery(items, order: [.descending("n")], limit: 1)).map(\.id)
                let found = try await replica.record("b", in: items)?.id
                answered.withLock { $0 = ["\(count)"] + first + [found ?? "nil"] }
            }
            let deadline = ContinuousClock.now + .seconds(30)
            while answered.withLock({ $0.isEmpty }), ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(10)) }
            let seen = answered.withLock { $0 }
            release.signal()
            release.signal()
            for task in held { try await task.value }
            try await readers.value
            #expect(seen == ["3", "c", "b"], "reads waited for the open ones")
            // A sign-out (which empties the logs with no read running) still completes.
            try await replica.signOut()
            await #expect(try replica.count(in: items) == 3)
        }
    }
}

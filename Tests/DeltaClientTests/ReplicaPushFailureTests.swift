import DeltaClient
import DeltaCore
import DeltaSQLiteStore
import DeltaStore
import DeltaTestSupport
import Foundation
import Testing

@Suite("Pushes that fail: an answer lost after the commit, a push refused for good")
struct ReplicaPushFailureTests {
    @Test("a push whose answer is lost after the server committed is retried until it lands, and applied once")
    func lostAnswer() async throws {
        try await withHarness { harness in
            try await harness.put(#"{"id":"a","n":1}"#)
            var configuration = harness.configuration(snapshot: try await harness.bake("v1"), viaProxy: true)
            configuration.requestTimeout = 2
            let replica = try await Replica.open(configuration)
            try await replica.put(try record(#"{"id":"a","n":2}"#), in: items)
            try await replica.put(try record(#"{"id":"b","n":1}"#), in: items)
            harness.proxy.plan(.loseAnswer(.seconds(6)))
            let lost = await #expect(throws: ReplicaError.self) { try await replica.sync() }
            #expect(lost?.kind == .network)
            let head = try await harness.store.headPosition()
            #expect(try await harness.serverRecords() == ["a": #"{"id":"a","n":2}"#, "b": #"{"id":"b","n":1}"#])
            try await Task.sleep(for: .milliseconds(50))
            // The retry gets the default timeout: two seconds is too short for a push and a pull
            // on a machine that runs the whole suite at once. The outbox is the same file.
            configuration.requestTimeout = 60
            let retry = try await Replica.open(configuration)
            let report = try await retry.sync()
            #expect(report.pushed.applied == 2)
            #expect(try await harness.store.headPosition() == head)
            #expect(harness.proxy.pushes == 2)
            #expect(try await retry.contents() == harness.serverRecords())
            await #expect(try retry.state(of: "a", in: items) == .synced)
        }
    }

    @Test("a push the server refuses for good (403) keeps the writes; the pull still runs and the report says why")
    func refusedPush() async throws {
        try await withHarness { harness in
            try await harness.put(#"{"id":"a","n":1}"#)
            var configuration = harness.configuration(snapshot: try await harness.bake("v1"), viaProxy: true)
            configuration.clientKey = "not-the-key"
            let replica = try await Replica.open(configuration)
            try await replica.put(try record(#"{"id":"a","n":2}"#), in: items)
            try await harness.put(#"{"id":"z"}"#)
            let report = try await replica.sync()
            #expect(report.pushError?.kind == .refused)
            #expect(report.pushError?.evidence?.hasPrefix("HTTP 401") == true)
            #expect(report.collections.first?.outcome == .applied(upserted: 1, hidden: 0))
            await #expect(try replica.state(of: "a", in: items) == .pending)
            await #expect(try replica.record("a", in: items)?.body == Array(#"{"id":"a","n":2}"#.utf8))
        }
    }
}

@Suite("Replica writes against a server of another database")
struct ForeignServerWriteTests {
}

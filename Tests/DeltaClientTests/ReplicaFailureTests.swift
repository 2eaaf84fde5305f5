import DeltaClient
import DeltaCore
import DeltaTestSupport
import Foundation
import Testing

@Suite("Replica: failures that are not the delta's fault")
struct ReplicaFailureTests {
    @Test("no network: the sync fails as transient, the data stays, and the next sync retries")
    func networkDown() async throws {
        try await withHarness { harness in
            try await harness.put(#"{"id":"a"}"#)
            let snapshot = try await harness.bake("v1")
            var configuration = harness.configuration(snapshot: snapshot)
            configuration.serverURL = URL(string: "http://127.0.0.1:9/api")!  // discard: nothing listens there
            let replica = try await Replica.open(configuration)
            let events = replica.events()
            let error = await #expect(throws: ReplicaError.self) { try await replica.sync() }
            #expect(error?.kind == .network)
            #expect(error?.isTransient == true)
            #expect(error?.retryAt != nil)
            await #expect(try replica.contents() == ["a": #"{"id":"a"}"#])
            var iterator = events.makeAsyncIterator()
            #expect(await iterator.next() == .started)
            guard case .failed(let reported) = await iterator.next() else {
                Issue.record("expected a failed event")
                return
            }
            #expect(reported.kind == .network)
            // Back online (initial back-off 0 in tests): the same replica syncs.
            configuration.serverURL = harness.apiURL()
            try await harness.put(#"{"id":"b"}"#)
            let online = try await Replica.open(configuration)
            #expect(try await online.sync().collections.first?.outcome == .applied(upserted: 1, hidden: 0))
        }
    }

    @Test("a timeout is not a reset: the sync fails as a network failure and the data stays")
    func timeout() async throws {
        try await withHarness { harness in
            try await harness.put(#"{"id":"a"}"#)
            var configuration = harness.configuration(snapshot: try await harness.bake("v1"), viaProxy: true)
            configuration.requestTimeout = 1
            let replica = try await Replica.open(configuration)
            try await harness.put(#"{"id":"b"}"#)
            harness.proxy.plan(.stall(.seconds(3)))
            let error = await #expect(throws: ReplicaError.self) { try await replica.sync() }
            #expect(error?.kind == .network)
            #expect(error?.isTransient == true)
            await #expect(try replica.contents() == ["a": #"{"id":"a"}"#])
            // The retry gets the default timeout: one second is too short for an answer on a
            // machine that runs the whole suite at once (seen in CI).
            configuration.requestTimeout = 60
            let retry = try await Replica.open(configuration)
            #expect(try await retry.sync().collections.first?.outcome == .applied(upserted: 1, hidden: 0))
        }
    }

    @Test("503 and 429 are not resets: data kept, Retry-After honoured, no request during the back-off", arguments: [503, 429])
    func serverUnavailable(_ status: Int) async throws {
        try await withHarness { harness in
            try await harness.put(#"{"id":"a"}"#)
            let replica = try await Replica.open(harness.configuration(snapshot: try await harness.bake("v1"), viaProxy: true))
            try await harness.put(#"{"id":"b"}"#)
            harness.proxy.plan(.status(status, retryAfter: "120"))
            let before = Date()
            let error = await #expect(throws: ReplicaError.self) { try await replica.sync() }
            let after = Date()
            #expect(error?.kind == .serverUnavailable)
            #expect(error?.description.contains("\(status)") == true)
            // 120 s from the answer (Retry-After is whole seconds), however long the sync took.
            let retryAt = try #require(error?.retryAt)
            #expect(retryAt >= before.addingTimeInterval(119) && retryAt <= after.addingTimeInterval(121))
            await #expect(try replica.contents() == ["a": #"{"id":"a"}"#])
            let requests = harness.proxy.requests.count
            let again = await #expect(throws: ReplicaError.self) { try await replica.sync() }
            #expect(again?.kind == .backingOff)
            #expect(harness.proxy.requests.count == requests)
            #expect(try await replica.syncIfNeeded(minimumInterval: 0) == nil)
        }
    }

    @Test("back-off doubles with each failure in a row and stops at the maximum")
    func backoffSchedule() {
        var configuration = ReplicaConfiguration(
            storeURL: URL(fileURLWithPath: "/tmp/x"), snapshotURL: URL(fileURLWithPath: "/tmp/y"), serverURL: URL(string: "http://h/api")!)
        configuration.initialBackoff = 2
        configuration.maximumBackoff = 60
        #expect([1, 2, 3, 4, 5, 6, 10].map { configuration.backoff(afterFailures: $0) } == [2, 4, 8, 16, 32, 60, 60])
    }

    @Test("a 404 (wrong URL) is refused for good, with the server's message, and changes nothing")
    func refused() async throws {
        try await withHarness { harness in
            try await harness.put(#"{"id":"a"}"#)
            var configuration = harness.configuration(snapshot: try await harness.bake("v1"))
            configuration.serverURL = harness.apiURL().appendingPathComponent("nested")
            let replica = try await Replica.open(configuration)
            let error = await #expect(throws: ReplicaError.self) { try await replica.sync() }
            #expect(error?.kind == .refused)
            #expect(error?.isTransient == false)
            await #expect(try replica.count(in: items) == 1)
        }
    }

    @Test("opening with a snapshot that fails its checks is a clear error, and the store is left alone")
    func corruptSnapshot() async throws {
        try await withHarness { harness in
            try await harness.put(#"{"id":"a"}"#)
            let snapshot = try await harness.bake("v1")
            var bytes = try Array(Data(contentsOf: snapshot))
            bytes[bytes.count - 12] ^= 0xFF
            try Data(bytes).write(to: snapshot)
            let error = await #expect(throws: ReplicaError.self) { try await Replica.open(harness.configuration(snapshot: snapshot)) }
            #expect(error?.kind == .snapshot)
            #expect(error?.description.hasPrefix("snapshot: the bundled snapshot fails its checks (v1.snapshot: ") == true)
            let bad = await #expect(throws: ReplicaError.self) {
                try await Replica.open(
                    ReplicaConfiguration(
                        storeURL: harness.directory.appendingPathComponent("r.sqlite"), snapshotURL: snapshot, serverURL: URL(string: "ftp://x/api")!))
            }
            #expect(bad?.description == "configuration: the server URL must be http or https with a host (ftp://x/api)")
        }
    }
}

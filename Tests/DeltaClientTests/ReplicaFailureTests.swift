import DeltaClient
import DeltaCore
import DeltaSQLite
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
            // The back-off says what caused it, and does not hide it: the status keeps the cause.
            #expect(again?.evidence?.contains("the last failure: server unavailable:") == true)
            #expect(again?.reason.contains("sync(force: true) tries now") == true)
            #expect(replica.syncState.lastError?.kind == .serverUnavailable)
            // The server is back: a forced sync goes through at once and clears both.
            #expect(try await replica.sync(force: true).collections.first?.outcome == .applied(upserted: 1, hidden: 0))
            #expect(replica.syncState.lastError == nil)
            #expect(try await replica.sync().collections.first?.outcome == .notModified)
        }
    }

    @Test("a push refused for good is the status's lastError although the pull ran")
    func refusedPushIsTheLastError() async throws {
        try await withHarness { harness in
            try await harness.put(#"{"id":"a"}"#)
            var configuration = harness.configuration(snapshot: try await harness.bake("v1"))
            configuration.clientKey = "not-the-app-key"
            let replica = try await Replica.open(configuration)
            try await replica.put(try record(#"{"id":"mine"}"#), in: items)
            try await harness.put(#"{"id":"b"}"#)
            let report = try await replica.sync()
            #expect(report.collections.first?.outcome == .applied(upserted: 1, hidden: 0))
            let refused = try #require(report.pushError)
            #expect(refused.kind == .refused)
            #expect(replica.syncState.lastError == refused)
        }
    }

    @Test("cancelling one caller ends its wait only: a sync another caller waits on goes on and applies")
    func cancellingOneCaller() async throws {
        try await withHarness { harness in
            try await harness.put(#"{"id":"a"}"#)
            let replica = try await Replica.open(harness.configuration(snapshot: try await harness.bake("v1"), viaProxy: true))
            try await harness.put(#"{"id":"b"}"#)
            harness.proxy.plan(.stall(.seconds(5)))
            let finished = Locked(false)
            let refresh = Task {
                let report = try await replica.sync()
                finished.withLock { $0 = true }
                return report
            }
            let disappearing = Task { try await replica.sync() }
            try await Task.sleep(for: .milliseconds(300))
            disappearing.cancel()
            await #expect(throws: CancellationError.self) { try await disappearing.value }
            // Its wait ended at once, not when the stalled answer came.
            #expect(finished.withLock { $0 } == false)
            let report = try await refresh.value
            #expect(report.collections.first?.outcome == .applied(upserted: 1, hidden: 0))
            #expect(try await replica.contents() == ["a": #"{"id":"a"}"#, "b": #"{"id":"b"}"#])
            // The only caller cancelled: the sync itself is cancelled, and the store keeps its state.
            try await harness.put(#"{"id":"c"}"#)
            harness.proxy.plan(.stall(.seconds(2)))
            let alone = Task { try await replica.sync() }
            try await Task.sleep(for: .milliseconds(300))
            alone.cancel()
            await #expect(throws: CancellationError.self) { try await alone.value }
            #expect(try await replica.contents() == ["a": #"{"id":"a"}"#, "b": #"{"id":"b"}"#])
            // A caller already cancelled when it calls waits for nothing and starts nothing.
            let early = Task {
                withUnsafeCurrentTask { $0?.cancel() }
                return try await replica.sync()
            }
            await #expect(throws: CancellationError.self) { try await early.value }
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

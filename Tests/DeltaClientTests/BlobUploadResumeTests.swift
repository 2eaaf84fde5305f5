import DeltaClient
import DeltaCore
import DeltaSQLiteStore
import DeltaStore
import DeltaTestSupport
import Foundation
import Testing

@Suite("Blob uploads resume from the bytes the server kept after a cut")
struct BlobUploadResumeTests {
    static let size = 48 << 20

    @Test("A sync cut off during an upload: the next sends only what the server did not keep (Upload-Offset), and the blob is whole")
    func resumeAfterCut() async throws {
        try await withHarness { harness in
            try await harness.put(#"{"id":"seed"}"#)
            let snapshot = try await harness.bake("base")
            let seed = SeededGenerator.seed(for: "BlobUploadResumeTests.resumeAfterCut")
            var random = SeededGenerator(seed: seed)
            let bytes = Data(random.bytes(Self.size))
            // The writer's uplink passes a connection's first 8 MiB and drops the rest, so that the
            // upload is still under way whenever this test, which may wait seconds for a thread on
            // a loaded machine, cuts it; then it passes the resumed upload whole.
            let uplink = try LoopbackRelay(upstream: harness.serverPort, holdingAfter: 8 << 20)
            defer { uplink.close() }
            var configuration = harness.configuration("writer", snapshot: snapshot)
            configuration.serverURL = URL(string: "http://127.0.0.1:\(uplink.port)/api")!
            let writer = try await Replica.open(configuration)
            let reference = try await writer.attach(bytes, type: "application/octet-stream")
            try await writer.put(try ReplicaBlobTests.record("big", "file", reference), in: items)

            // Cut the sync once the upload is under way.
            // Subscribed here, before the sync starts: the stream keeps its newest reports.
            let starting = writer.blobTransfers()
            let started = Task { await BlobResumeTests.collect(starting, until: { $0.bytes >= 1 << 20 }) }
            let cut = Task { try await writer.sync() }
            _ = await started.value
            cut.cancel()
            await #expect(throws: (any Error).self) { _ = try await cut.value }
            #expect(try await harness.store.blob(reference.hash) == nil, "the upload ended before the cut: nothing to resume")
            var kept: Int64 = 0
            let deadline = ContinuousClock.now + .seconds(30)
            while kept == 0 && ContinuousClock.now < deadline {
                kept = try await harness.store.keptUpload(reference.hash, holder: "app")
                if kept == 0 { try await Task.sleep(for: .milliseconds(20)) }
            }
            // At most what the relay passed (8 MiB, less the requests' heads before the body).
            #expect(kept > 0 && kept <= 8 << 20, "\(kept) bytes kept")

            uplink.passWhole()

            let resuming = writer.blobTransfers()
            let resumed = Task { await BlobResumeTests.collect(resuming, until: { $0.isFinished }) }
            _ = try await writer.sync()
            let reports = await resumed.value
            #expect(reports.first?.bytes == kept, "the upload resumed from the \(kept) bytes kept: \(reports.prefix(2))")
            #expect(reports.allSatisfy { $0.bytes >= kept } && reports.last?.isFinished == true)
            #expect(try await harness.store.blob(reference.hash)?.size == Int64(Self.size))
            #expect(try await harness.store.keptUpload(reference.hash, holder: "app") == 0)
            let metrics = try String(contentsOf: URL(string: "http://127.0.0.1:\(harness.serverPort)/metrics")!, encoding: .utf8)
            #expect(metrics.contains("\ndeltasnap_blob_uploads_resumed_total 1\n"), "the server counted one resumed upload")
            let reader = try await Replica.open(harness.configuration("reader", snapshot: snapshot))
            _ = try await reader.sync()
            #expect(try Data(contentsOf: try await reader.blob(reference)) == bytes)
        }
    }
}

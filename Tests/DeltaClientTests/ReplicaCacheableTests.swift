import DeltaClient
import DeltaCore
import DeltaServer
import DeltaTestSupport
import Foundation
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

@Suite("A replica follows cacheable reads")
struct ReplicaCacheableTests {
    @Test(
        "Through the 307s of serve --cacheable-reads, a writing replica's pull confirms its own writes (Delta-Last-Mutation on the 307), and edits from another replica arrive as deltas"
    )
    func writingReplicaThroughRedirects() async throws {
        try await withHarness(configure: { $0.cacheableReads = true }) { harness in
            try await harness.put(#"{"id":"a","n":1}"#, #"{"id":"b","n":2}"#, #"{"id":"c","n":3}"#)
            let snapshot = try await harness.bake("v1")
            let first = try await Replica.open(harness.configuration("first", snapshot: snapshot))
            let second = try await Replica.open(harness.configuration("second", snapshot: snapshot))
            try await first.put(try record(#"{"id":"a","n":10}"#), in: items)
            let pushed = try await first.sync()
            #expect(pushed.pushed.applied == 1)
            await #expect(try first.state(of: "a", in: items) == .synced, "the pull through the redirect confirmed the write")
            let pulled = try await second.sync()
            #expect(pulled.collections.first?.outcome == .applied(upserted: 1, hidden: 0))
            #expect(pulled.collections.first?.reset == nil)
            await #expect(try second.contents() == (try await harness.serverRecords()))
            await #expect(try first.contents() == (try await harness.serverRecords()))
            let metrics = try await URLSession.shared.data(from: URL(string: "http://127.0.0.1:\(harness.serverPort)/metrics")!).0
            let text = String(decoding: metrics, as: UTF8.self)
            #expect(text.contains("deltasnap_cacheable_redirects_total 2"), "both pulls were redirected")
        }
    }
}

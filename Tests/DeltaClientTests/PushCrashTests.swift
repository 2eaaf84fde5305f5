import DeltaClient
import DeltaCore
import DeltaSQLite
import DeltaSQLiteStore
import DeltaStore
import DeltaTestSupport
import Foundation
import Testing

@Suite("deltasnap sync killed with SIGKILL while pushing")
struct PushCrashTests {
    @Test("after kills at random moments, the server holds exactly the last local edit of every record, each mutation once")
    func killWhilePushing() async throws {
        let seed = SeededGenerator.seed(for: "PushCrashTests.killWhilePushing")
        print("PushCrashTests.killWhilePushing: \(crashIterations) kills")
        try await withHarness { harness in
            var random = SeededGenerator(seed: seed)
            let ids = (0..<40).map { "r\($0)" }
            try await harness.putMany(ids.map { #"{"id":"\#($0)","v":0}"# })
            let snapshot = try await harness.bake("v0")
            let store = harness.directory.appendingPathComponent("pusher.sqlite")
            let sync = ["sync", "--store", store.path, "--snapshot", snapshot.path, "--url", harness.apiURL().absoluteString, "--client-key", appKey]
            var (status, printed) = try await runDeltasnap(sync)
            #expect(status == 0, "\(printed)")
            let outbox = try ReplicaFiles(storeURL: store)
            // What the app sees: id -> body, nil once deleted.
            var expected: [String: String?] = Dictionary(uniqueKeysWithValues: ids.map { ($0, #"{"id":"\#($0)","v":0}"#) })
            var killed = 0
            for iteration in 0..<crashIterations {
                var plan: [(id: String, body: String?)] = []
                for edit in 0..<Int.random(in: 1...25, using: &random) {
                    let id = ids.randomElement(using: &random)!
                    let body: String? = Int.random(in: 0..<5, using: &random) == 0 ? nil : #"{"e":\#(edit),"id":"\#(id)","v":\#(iteration + 1)}"#
                    plan.append((id, body))
                    expected[id] = .some(body)
                }
                let edits = plan
                try await offThePool {
                    for (id, body) in edits {
                        if let body { try outbox.put([try record(body)], in: items) } else { try outbox.delete(id, in: items) }
                    }
                }
                let process = try ChildProcess(try deltasnapExecutable(), sync)
                try await Task.sleep(for: .milliseconds(Int.random(in: 0...120, using: &random)))
                if await process.stop(SIGKILL) != 0 { killed += 1 }
            }
            (status, printed) = try await runDeltasnap(sync + ["--json"])
            #expect(status == 0, "seed \(seed): \(printed)")
            #expect(try outbox.conflicts().isEmpty, "seed \(seed)")
            let server = try await harness.serverRecords()
            let visible = expected.compactMapValues { $0 }
            #expect(server == visible, "seed \(seed): the server differs from the app's last edits")
            var local: [String: String] = [:]
            try ReplicaReader(storeURL: store).forEachRecord(in: items) { local[$0.id] = String(decoding: $0.body, as: UTF8.self) }
            #expect(local == visible, "seed \(seed)")
            let assigned = try Connection(path: outbox.outboxURL.path).integer("SELECT CAST(value AS INTEGER) FROM meta WHERE key = 'last_mutation'") ?? 0
            let recorded = try await harness.store.read(try CollectionName(items), since: .nothing, client: outbox.clientID)
            if case .changes(let feed) = recorded.result { feed.close() }
            #expect(
                recorded.lastMutation == UInt64(assigned),
                "seed \(seed): the server recorded \(String(describing: recorded.lastMutation)) of \(assigned) mutations")
            #expect(try outbox.counts().allSatisfy { $0.pending == 0 && $0.conflicted == 0 })
            print("PushCrashTests: \(crashIterations) runs, \(killed) killed before they finished, \(assigned) mutations, seed \(seed)")
        }
    }
}

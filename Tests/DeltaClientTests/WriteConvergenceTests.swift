import DeltaClient
import DeltaCore
import DeltaStore
import DeltaTestSupport
import Foundation
import Testing

@Suite("Convergence with writing replicas")
struct WriteConvergenceTests {
    @Test("replicas edit offline while the owner writes; after syncs and resolutions the server and every replica are equal, outboxes empty")
    func writingReplicasConverge() async throws {
        let seed = SeededGenerator.seed(for: "WriteConvergenceTests.writingReplicasConverge")
        try await withHarness { harness in
            var random = SeededGenerator(seed: seed)
            let ids = (0..<30).map { "r\($0)" }
            try await harness.putMany(ids.map { #"{"id":"\#($0)","v":0}"# })
            let snapshot = try await harness.bake("v0")
            var replicas: [Replica] = []
            for index in 0..<4 {
                replicas.append(try await Replica.open(harness.configuration("writer\(index)", snapshot: snapshot, viaProxy: index % 2 == 1)))
            }
            var reported = 0
            var resolved = 0
            var pushedApplied = 0
            var failedSyncs = 0
            for step in 0..<80 {
                let actor = Int.random(in: 0...replicas.count, using: &random)
                if actor == replicas.count {
                    // The owner writes on the server: edits, hides, brings back.
                    let chosen = (0..<Int.random(in: 1...4, using: &random)).map { _ in ids.randomElement(using: &random)! }
                    for id in Set(chosen) {
                        if Bool.random(using: &random) { try await harness.put(#"{"id":"\#(id)","owner":\#(step)}"#) } else { try? await harness.hide(id) }
                    }
                    continue
                }
                let replica = replicas[actor]
                var plan: [(delete: String?, put: String?)] = []
                for edit in 0..<Int.random(in: 0...4, using: &random) {
                    switch Int.random(in: 0..<6, using: &random) {
                    case 0: plan.append((ids.randomElement(using: &random)!, nil))
                    case 1: plan.append((nil, #"{"id":"n\#(actor)-\#(step)-\#(edit)","by":\#(actor)}"#))
                    default: plan.append((nil, #"{"id":"\#(ids.randomElement(using: &random)!)","by":\#(actor),"s":\#(step)}"#))
                    }
                }
                for edit in plan {
                    if let id = edit.delete { try await replica.delete(id, in: items) }
                    if let body = edit.put { try await replica.put(try record(body), in: items) }
                }
                if Int.random(in: 0..<6, using: &random) == 0 { harness.proxy.plan(.status(503, retryAfter: nil)) }
                do {
                    let report = try await replica.sync()
                    reported += report.pushed.conflicts.count
                    pushedApplied += report.pushed.applied
                } catch let error as ReplicaError where error.isTransient {
                    failedSyncs += 1
                }
                harness.proxy.clearPlans()
                for conflict in try await replica.conflicts() where Bool.random(using: &random) {
                    let choice = Int.random(in: 0..<3, using: &random)
                    let resolution: Resolution =
                        choice == 0 ? .keepServer : choice == 1 ? .keepLocal : .merged(try record(#"{"id":"\#(conflict.id)","merged":\#(step)}"#))
                    try await replica.resolve(conflict.id, in: items, resolution)
                    resolved += 1
                }
            }
            // Settle: every remaining conflict keeps the server's copy; sync until nothing waits.
            for _ in 0..<4 {
                for replica in replicas {
                    for conflict in try await replica.conflicts() {
                        try await replica.resolve(conflict.id, in: items, .keepServer)
                        resolved += 1
                    }
                    let report = try await replica.sync()
                    reported += report.pushed.conflicts.count
                    pushedApplied += report.pushed.applied
                }
            }
            for replica in replicas { _ = try await replica.sync() }
            let server = try await harness.serverRecords()
            for (index, replica) in replicas.enumerated() {
                await #expect(try replica.contents() == server, "seed \(seed): replica \(index) differs from the server")
                await #expect(try replica.conflicts().isEmpty, "seed \(seed)")
                #expect(try ReplicaFiles(storeURL: replica.configuration.storeURL).counts().isEmpty, "seed \(seed): replica \(index) still holds local writes")
            }
            #expect(reported == resolved, "seed \(seed): \(reported) conflicts reported, \(resolved) resolved")
            print(
                "WriteConvergenceTests: \(pushedApplied) mutations applied, \(reported) conflicts reported and resolved, \(failedSyncs) syncs failed (503), 0 divergences (seed \(seed))"
            )
        }
    }
}

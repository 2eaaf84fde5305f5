import DeltaClient
import DeltaCore
import DeltaSQLite
import DeltaSQLiteStore
import DeltaStore
import DeltaTestSupport
import Foundation
import Testing

@Suite("Replicas converge under concurrent writers, resets and newer snapshots")
struct ReplicaConvergenceTests {
    @Test(
        "three writers (upserts, hides, un-hides, batches, 360 commits) and six replicas syncing at random moments; some reset midway, one adopts a newer snapshot; at the end every replica equals the server"
    )
    func converge() async throws {
        let seed = SeededGenerator.seed(for: "ReplicaConvergenceTests.converge")
        try await withHarness { harness in
            try await harness.putMany((0..<200).map { #"{"id":"r\#($0)","v":0}"# })
            let first = try await harness.bake("s0")
            let commits = Locked(0)
            let writersDone = Locked(false)
            let tally = Locked((syncs: 0, resets: 0))
            let newer = Locked<URL?>(nil)
            try await withThrowingTaskGroup(of: Void.self) { group in
                for writer in 0..<3 {
                    group.addTask {
                        var random = SeededGenerator(seed: seed &+ UInt64(writer) &* 7919)
                        for step in 0..<120 {
                            let ids = (0...(random.next() % 5)).map { _ in "r\(random.next() % 300)" }
                            let hide = random.next() % 4 == 0
                            do {
                                _ = try await harness.store.write(to: try CollectionName(items)) { transaction in
                                    for id in Set(ids) {
                                        if hide {
                                            _ = try? await transaction.hide(id: id)
                                        } else {
                                            try await transaction.upsert(try Record(parsing: Array(#"{"id":"\#(id)","v":\#(step),"w":\#(writer)}"#.utf8)))
                                        }
                                    }
                                }
                            }
                            commits.withLock { $0 += 1 }
                            if writer == 0 && step == 60 {
                                let url = try await harness.bake("s1")
                                newer.withLock { $0 = url }
                            }
                            try await Task.sleep(for: .milliseconds(Int(random.next() % 25)))
                        }
                    }
                }
                group.addTask {
                    while commits.withLock({ $0 }) < 360 { try await Task.sleep(for: .milliseconds(20)) }
                    writersDone.withLock { $0 = true }
                }
                for client in 0..<6 {
                    group.addTask {
                        var random = SeededGenerator(seed: seed &+ 1000 &+ UInt64(client))
                        let viaProxy = client >= 3
                        var replica = try await Replica.open(harness.configuration("client-\(client)", snapshot: first, viaProxy: viaProxy))
                        var adopted = false
                        while !writersDone.withLock({ $0 }) {
                            try await Task.sleep(for: .milliseconds(Int(random.next() % 20)))
                            if viaProxy && random.next() % 3 == 0 {
                                harness.proxy.plan([Tamper.truncate, .wrongShape, .otherBase, .dropValidators, .corruptGzip][Int(random.next() % 5)])
                            }
                            if client == 5, !adopted, let url = newer.withLock({ $0 }) {
                                replica = try await Replica.open(harness.configuration("client-\(client)", snapshot: url, viaProxy: viaProxy))
                                adopted = true
                            }
                            do {
                                let report = try await replica.sync()
                                tally.withLock {
                                    $0.syncs += 1
                                    $0.resets += report.collections.filter { $0.reset != nil }.count
                                }
                            } catch let error as ReplicaError where error.kind == .unusableAnswer {
                                // Three tampered answers in a row (the proxy's plans are shared): the
                                // replica is back at its snapshot, and the next sync recovers.
                                tally.withLock {
                                    $0.syncs += 1
                                    $0.resets += 1
                                }
                            }
                        }
                    }
                }
                try await group.waitForAll()
            }
            harness.proxy.clearPlans()
            let server = try await harness.serverRecords()
            var divergences = 0
            for client in 0..<6 {
                let snapshot = client == 5 ? try #require(newer.withLock { $0 }) : first
                let replica = try await Replica.open(harness.configuration("client-\(client)", snapshot: snapshot, viaProxy: client >= 3))
                _ = try await replica.sync()
                if try await replica.contents() != server { divergences += 1 }
            }
            let (syncs, resets) = tally.withLock { $0 }
            print(
                "ReplicaConvergenceTests: \(commits.withLock { $0 }) commits by 3 writers, 6 replicas, \(syncs) syncs, \(resets) resets, \(divergences) divergences (seed \(seed))"
            )
            #expect(resets > 0)
            #expect(divergences == 0, "seed \(seed)")
        }
    }
}

import DeltaClient
import DeltaCore
import DeltaSQLite
import DeltaTestSupport
import Foundation
import Testing

@Suite("Replica: the state digest catches what is valid but wrong")
struct DigestTests {
    /// Corruptions that keep the body a valid delta, each as a cache or a bug might serve it.
    static let corruptions: [(name: String, rewrite: @Sendable (String) -> String)] = [
        ("a changed value", { $0.replacingOccurrences(of: #""v":1"#, with: #""v":2"#) }),
        ("a dropped record", { $0.replacingOccurrences(of: #"{"id":"r5","n":[1.5,true,null],"v":1},"#, with: "") }),
        ("a record from another token", { $0.replacingOccurrences(of: #"{"id":"r5","n":[1.5,true,null],"v":1}"#, with: #"{"id":"r5","s":"text 5","v":0}"#) }),
        ("an extra record", { $0.replacingOccurrences(of: #"{"items":["#, with: #"{"items":[{"id":"r99","v":0},"#) }),
        ("a tombstone dropped", { $0.replacingOccurrences(of: #",{"hidden":true,"id":"r3","s":"text 3","v":0}"#, with: "") }),
    ]

    @Test(
        "a delta that is valid JSON but wrong (a changed value, a dropped record or tombstone, a record from another token, an extra record) is never committed: the replica resets and equals the server"
    )
    func validButWrong() async throws {
        try await withHarness { harness in
            try await harness.putMany((0..<10).map { #"{"id":"r\#($0)","v":0,"s":"text \#($0)"}"# })
            let snapshot = try await harness.bake("v0")
            try await harness.putMany([0, 5].map { #"{"id":"r\#($0)","v":1,"n":[1.5,true,null]}"# })
            try await harness.hideMany(["r3"])
            let server = try await harness.serverRecords()
            for (index, corruption) in Self.corruptions.enumerated() {
                let replica = try await Replica.open(harness.configuration("wrong-\(index)", snapshot: snapshot, viaProxy: true))
                let sentBefore = harness.proxy.bodies.count
                harness.proxy.plan(.rewrite(corruption.rewrite))
                let report = try await replica.sync()
                let served = String(decoding: harness.proxy.bodies[sentBefore].body, as: UTF8.self)
                #expect(HostileAnswerTests.parse(Array(served.utf8), gzipLabel: false) != nil, "\(corruption.name): the corrupted body is still a valid delta")
                guard case .digestMismatch(let detail) = report.collections.first?.reset else {
                    Issue.record("\(corruption.name): not caught by the digest: \(String(describing: report.collections.first))")
                    continue
                }
                #expect(detail.hasPrefix("items holds "), "\(corruption.name): \(detail)")
                await #expect(try replica.contents() == server, "\(corruption.name): after the reset the replica does not equal the server")
            }
        }
    }

    @Test("a store from before digests (no stored digest) computes it once on its next answer, keeps it when it matches, and resets when it does not")
    func storeFromBeforeDigests() async throws {
        try await withHarness { harness in
            try await harness.putMany((0..<5).map { #"{"id":"r\#($0)","v":0}"# })
            let configuration = harness.configuration("older", snapshot: try await harness.bake("v0"))
            let replica = try await Replica.open(configuration)
            _ = try await replica.sync()
            let store = try Connection(path: configuration.storeURL.path)
            let stored = try #require(try store.text("SELECT value FROM sync_state WHERE key = 'digest:items'"))
            try store.execute("DELETE FROM sync_state WHERE key = 'digest:items'")
            #expect(try await replica.sync().collections.first?.outcome == .notModified)
            #expect(try store.text("SELECT value FROM sync_state WHERE key = 'digest:items'") == stored)
            try store.execute("DELETE FROM sync_state WHERE key = 'digest:items'; UPDATE records SET body = '{\"id\":\"r1\",\"v\":9}' WHERE id = 'r1'")
            guard case .digestMismatch = try await replica.sync().collections.first?.reset else {
                Issue.record("a changed record in a store without a stored digest was not caught on a 304")
                return
            }
            await #expect(try replica.contents() == (try await harness.serverRecords()))
        }
    }

    @Test(
        "a record changed in the local store behind the replica's back: the next answer that touches it resets the collection; the full integrity check finds one no answer touches"
    )
    func tamperedStore() async throws {
        try await withHarness { harness in
            try await harness.putMany((0..<10).map { #"{"id":"r\#($0)","v":0}"# })
            let snapshot = try await harness.bake("v0")
            var configuration = harness.configuration("tampered", snapshot: snapshot)
            let replica = try await Replica.open(configuration)
            _ = try await replica.sync()
            func tamper(_ id: String) throws {
                let connection = try Connection(path: configuration.storeURL.path)
                try connection.statement("UPDATE records SET body = ? WHERE id = ?").run(.text(#"{"id":"\#(id)","v":666}"#), .text(id))
            }
            // A 304 checks the stored digest only; the tampered record is found when a delta touches it.
            try tamper("r1")
            let unchanged = try await replica.sync()
            #expect(unchanged.collections.first?.outcome == .notModified)
            try await harness.put(#"{"id":"r1","v":1}"#)
            let report = try await replica.sync()
            guard case .digestMismatch = report.collections.first?.reset else {
                Issue.record("the tampered record was not caught: \(String(describing: report.collections.first))")
                return
            }
            await #expect(try replica.contents() == (try await harness.serverRecords()))
            // A record no answer touches: the full check on open rebuilds the store.
            try tamper("r2")
            configuration.integrityCheck = .full
            let reopened = try await Replica.open(configuration)
            guard case .corruptStore(let detail) = reopened.openReport.rebuilt else {
                Issue.record("the full check did not rebuild the store: \(reopened.openReport)")
                return
            }
            #expect(detail.hasPrefix("the records of items do not match its state digest"), "\(detail)")
            _ = try await reopened.sync()
            await #expect(try reopened.contents() == (try await harness.serverRecords()))
        }
    }
}

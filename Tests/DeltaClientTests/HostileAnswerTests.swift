import DeltaClient
import DeltaCore
import DeltaSQLite
import DeltaTestSupport
import Foundation
import Testing

/// How many mutated answers: `DELTASNAP_HOSTILE_CASES` (default 150).
let hostileCases = Int(ProcessInfo.processInfo.environment["DELTASNAP_HOSTILE_CASES"] ?? "") ?? 150

@Suite("Replica: hostile answers")
struct HostileAnswerTests {
    @Test(
        "a mutated delta body (truncated, flipped, inserted or deleted bytes, corrupt gzip): the replica ends equal to the server, by applying it when the mutation changed nothing or by resetting; never a crash, never a partial state, never wrong data"
    )
    func mutatedDeltas() async throws {
        let seed = SeededGenerator.seed(for: "HostileAnswerTests.mutatedDeltas")
        print("HostileAnswerTests.mutatedDeltas: \(hostileCases) cases")
        try await withHarness { harness in
            try await harness.putMany((0..<30).map { #"{"id":"r\#($0)","v":0,"s":"text \#($0)"}"# })
            let snapshot = try await harness.bake("v0")
            let pristine = try await harness.serverRecords()
            try await harness.putMany((0..<30).filter { $0 % 5 == 0 }.map { #"{"id":"r\#($0)","v":1,"n":[1.5,true,null]}"# })
            try await harness.hideMany(["r3", "r7"])
            let server = try await harness.serverRecords()
            var outcomes = (harmless: 0, caught: 0, reset: 0)
            for index in 0..<hostileCases {
                let caseSeed = seed &+ UInt64(index)
                let configuration = harness.configuration("hostile-\(index)", snapshot: snapshot, viaProxy: true)
                let replica = try await Replica.open(configuration)
                harness.proxy.plan(.mutate(caseSeed))
                let sentBefore = harness.proxy.bodies.count
                let report = try await replica.sync()
                let mutated = harness.proxy.bodies[sentBefore]
                let state = try await replica.contents()
                #expect(try Connection(path: configuration.storeURL.path).integrityProblems().isEmpty, "case seed \(caseSeed)")
                #expect(state == server, "case seed \(caseSeed): the replica does not equal the server")
                let reset = report.collections.first?.reset
                if let records = Self.parse(mutated.body, gzipLabel: mutated.gzipLabel) {
                    var applied = pristine
                    for record in records { applied[record.id] = record.hidden ? nil : String(decoding: record.body, as: UTF8.self) }
                    if applied == server {
                        #expect(reset == nil, "case seed \(caseSeed): a mutation that changed nothing still reset")
                        outcomes.harmless += 1
                    } else {
                        // Still a valid delta, but wrong: only the state digest can tell.
                        guard case .digestMismatch = reset else {
                            Issue.record("case seed \(caseSeed): a valid but wrong delta was not caught by the digest (\(String(describing: reset)))")
                            continue
                        }
                        outcomes.caught += 1
                    }
                } else {
                    #expect(reset != nil, "case seed \(caseSeed): an invalid delta did not reset")
                    outcomes.reset += 1
                }
                try? FileManager.default.removeItem(at: configuration.storeURL)
            }
            print(
                "HostileAnswerTests: of \(hostileCases) mutated answers, \(outcomes.harmless) changed nothing and were applied, \(outcomes.caught) were valid but wrong and caught by the state digest, \(outcomes.reset) were invalid and reset; 0 applied wrong"
            )
            #expect(outcomes.reset > hostileCases / 2)
        }
    }

    /// The records of a body as the client would read them, or nil when it cannot be read whole.
    static func parse(_ body: [UInt8], gzipLabel: Bool) -> [Record]? {
        do {
            var plain = body
            if gzipLabel { plain = try gunzip(body) }
            var decoder = ContentDecoder()
            var reader = EnvelopeReader(collection: try CollectionName(items))
            try decoder.decode(Data(plain)) { try reader.feed($0) }
            try decoder.finish()
            try reader.finish()
            var records: [Record] = []
            while let record = try reader.next() { records.append(record) }
            return records
        } catch {
            return nil
        }
    }
}

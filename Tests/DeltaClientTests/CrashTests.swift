import DeltaClient
import DeltaCore
import DeltaSQLite
import DeltaStore
import DeltaTestSupport
import Foundation
import Testing

/// How many SIGKILLs per phase: `DELTASNAP_CRASH_ITERATIONS` (default 25).
let crashIterations = Int(ProcessInfo.processInfo.environment["DELTASNAP_CRASH_ITERATIONS"] ?? "") ?? 25

@Suite("deltasnap sync killed with SIGKILL at random moments")
struct CrashTests {
    @Test("during a delta apply and during a reset, the store passes integrity_check and equals the state before or after")
    func killDuringApplyAndReset() async throws {
        let seed = SeededGenerator.seed(for: "CrashTests.killDuringApplyAndReset")
        try await withHarness { harness in
            var random = SeededGenerator(seed: seed)
            let count = 20_000
            try await harness.putMany((0..<count).map { #"{"id":"r\#($0)","v":0,"pad":"\#(String(repeating: "x", count: 100))"}"# })
            let snapshot = try await harness.bake("v0")
            try await harness.putMany((0..<count).filter { $0 % 4 == 0 }.map { #"{"id":"r\#($0)","v":1}"# })
            try await harness.hideMany((0..<count).filter { $0 % 7 == 0 }.map { "r\($0)" })
            let template = harness.directory.appendingPathComponent("template.sqlite")
            let arguments = { (store: URL) in
                ["sync", "--store", store.path, "--snapshot", snapshot.path, "--url", harness.apiURL(viaProxy: true).absoluteString]
            }
            let (status, printed) = try await runDeltasnap(arguments(template))
            #expect(status == 0, "\(printed)")
            let before = try contents(template)
            try await harness.putMany((0..<count).filter { $0 % 2 == 1 }.map { #"{"id":"r\#($0)","v":2}"# })
            try await harness.hideMany((0..<count).filter { $0 % 10 == 2 }.map { "r\($0)" })
            let after = try await harness.serverRecords()
            #expect(before != after)

            for phase in ["apply", "reset"] {
                // How long an undisturbed run takes, so that kills land all over it.
                let timed = try copy(template, to: harness.directory.appendingPathComponent("timed-\(phase).sqlite"))
                if phase == "reset" { harness.proxy.plan(.otherBase) }
                let start = ContinuousClock.now
                let (status, printed) = try await runDeltasnap(arguments(timed))
                let duration = ContinuousClock.now - start
                #expect(status == 0, "\(printed)")
                #expect(try contents(timed) == after)
                var seen = (before: 0, after: 0)
                for iteration in 0..<crashIterations {
                    let store = try copy(template, to: harness.directory.appendingPathComponent("\(phase)-\(iteration).sqlite"))
                    harness.proxy.clearPlans()
                    if phase == "reset" { harness.proxy.plan(.otherBase) }
                    let delay = duration * Double.random(in: 0...1.2, using: &random)
                    let process = try ChildProcess(try deltasnapExecutable(), arguments(store))
                    try await Task.sleep(for: delay)
                    await process.stop(SIGKILL)
                    let problems = try Connection(path: store.path).integrityProblems()
                    #expect(problems.isEmpty, "seed \(seed), \(phase) #\(iteration): integrity_check says \(problems)")
                    let state = try contents(store)
                    if state == before {
                        seen.before += 1
                    } else if state == after {
                        seen.after += 1
                    } else {
                        Issue.record(
                            "seed \(seed), \(phase) #\(iteration) killed after \(delay): the store is neither the state before nor after (\(state.count) records)"
                        )
                    }
                    try? FileManager.default.removeItem(at: store)
                }
                print(
                    "crash test \(phase): \(crashIterations) kills, \(seen.before) left the state before, \(seen.after) the state after (seed \(seed), undisturbed run \(duration))"
                )
            }
        }
    }

    private func copy(_ template: URL, to destination: URL) throws -> URL {
        for suffix in ["", "-wal"] where FileManager.default.fileExists(atPath: template.path + suffix) {
            try FileManager.default.copyItem(atPath: template.path + suffix, toPath: destination.path + suffix)
        }
        return destination
    }

    private func contents(_ store: URL) throws -> [String: String] {
        var records: [String: String] = [:]
        try ReplicaReader(storeURL: store).forEachRecord(in: items) { records[$0.id] = String(decoding: $0.body, as: UTF8.self) }
        return records
    }
}

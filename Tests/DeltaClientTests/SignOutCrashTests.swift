import DeltaClient
import DeltaCore
import DeltaSQLite
import DeltaSQLiteStore
import DeltaStore
import DeltaTestSupport
import Foundation
import Testing

@Suite("deltasnap sign-out killed with SIGKILL: the next user never sees the previous user's rows")
struct SignOutCrashTests {
    /// Kills per run: DELTASNAP_SIGNOUT_KILLS (Scripts/reliability.sh asks for 200).
    static let kills = ProcessInfo.processInfo.environment["DELTASNAP_SIGNOUT_KILLS"].flatMap { Int($0) } ?? 15

    @Test("Ada syncs, her sign-out is killed at a random moment, Bob syncs: his notes only, every time; a reopen finishes a started sign-out")
    func killedSignOuts() async throws {
        let seed = SeededGenerator.seed(for: "SignOutCrashTests.killedSignOuts")
        print("SignOutCrashTests.killedSignOuts: \(Self.kills) kills")
        try await withUserHarness { harness in
            var random = SeededGenerator(seed: seed)
            try await harness.put("airports", #"{"id":"p1","name":"Paris"}"#)
            let adas = (0..<300).map { #"{"id":"a\#($0)","owner":"ada","text":"\#(String(repeating: "x", count: 200))"}"# }
            _ = try await harness.store.write(to: try CollectionName("notes")) { transaction in
                for text in adas + [#"{"id":"b1","owner":"bob"}"#] { try await transaction.upsert(try Record(parsing: Array(text.utf8))) }
            }
            let snapshot = try await harness.bake()
            let store = harness.directory.appendingPathComponent("device.sqlite").path
            let ada = try await UserHarness.token("ada")
            let bob = try await UserHarness.token("bob")
            func sync(_ token: String) -> [String] {
                ["sync", "--store", store, "--snapshot", snapshot.path, "--url", harness.api.absoluteString, "--token", token]
            }
            var killed = 0
            var interrupted = 0
            for iteration in 0..<Self.kills {
                let signedIn: (status: Int32, printed: String) = try await runDeltasnap(sync(ada))
                #expect(signedIn.status == 0, "seed \(seed): \(signedIn.printed)")
                let process = try ChildProcess(try deltasnapExecutable(), ["sign-out", "--store", store, "--discard-pending"])
                try await Task.sleep(for: .microseconds(Int.random(in: 20_000...90_000, using: &random)))
                if await process.stop(SIGKILL) != 0 { killed += 1 }
                // Killed between its first and last step: the mark is there for the next open to finish.
                if try Connection(path: store, mode: .readOnly).text("SELECT value FROM sync_state WHERE key = 'signing-out'") != nil { interrupted += 1 }
                let next: (status: Int32, printed: String) = try await runDeltasnap(sync(bob))
                #expect(next.status == 0, "seed \(seed) iteration \(iteration): \(next.printed)")
                let replica = try await Replica.open(
                    ReplicaConfiguration(storeURL: URL(fileURLWithPath: store), snapshotURL: snapshot, serverURL: harness.api))
                let notes = try await replica.records("notes")
                #expect(notes.keys.sorted() == ["b1"], "seed \(seed) iteration \(iteration): \(notes.count) notes after Bob's sync")
                await #expect(try replica.records("airports").keys.sorted() == ["p1"])
            }
            print("SignOutCrashTests: seed \(seed), \(killed) of \(Self.kills) sign-outs killed before they ended, \(interrupted) of them halfway")
        }
    }
}

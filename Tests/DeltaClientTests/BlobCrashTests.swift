import DeltaClient
import DeltaCore
import DeltaSQLiteStore
import DeltaStore
import DeltaTestSupport
import Foundation
import Testing

@Suite("deltasnap sync and deltasnap blob killed with SIGKILL while blobs move")
struct BlobCrashTests {
    @Test("kills during uploads and downloads: no blob lost, no record on the server before its blob, no partial file under a blob's name")
    func killWhileMoving() async throws {
        let seed = SeededGenerator.seed(for: "BlobCrashTests.killWhileMoving")
        try await withHarness { harness in
            var random = SeededGenerator(seed: seed)
            try await harness.put(#"{"id":"seed"}"#)
            let snapshot = try await harness.bake("v0")
            let store = harness.directory.appendingPathComponent("uploader.sqlite")
            let sync = ["sync", "--store", store.path, "--snapshot", snapshot.path, "--url", harness.apiURL().absoluteString, "--client-key", appKey]
            var (status, printed) = try await runDeltasnap(sync)
            #expect(status == 0, "\(printed)")
            let files = try ReplicaFiles(storeURL: store)
            var originals: [String: BlobHash] = [:]
            var killed = 0
            for iteration in 0..<crashIterations {
                // One to three records, each with a file of 16 KiB to 1 MiB, then a sync killed at a random moment.
                for index in 0..<Int.random(in: 1...3, using: &random) {
                    let size = Int.random(in: (16 << 10)...(1 << 20), using: &random)
                    let bytes = random.bytes(size)
                    let file = harness.directory.appendingPathComponent("file-\(iteration)-\(index)")
                    try Data(bytes).write(to: file)
                    let id = "r\(iteration)-\(index)"
                    let reference = try await offThePool { try files.attach(contentsOf: file, type: "application/octet-stream") }
                    try await offThePool {
                        try files.put(
                            [try Record(parsing: Array(#"{"id":"\#(id)","file":"#.utf8) + reference.json.canonicalBytes + Array("}".utf8))], in: items)
                    }
                    originals[id] = BlobHash.of(bytes)
                }
                let process = try ChildProcess(try deltasnapExecutable(), sync)
                try await Task.sleep(for: .milliseconds(Int.random(in: 0...150, using: &random)))
                if await process.stop(SIGKILL) != 0 { killed += 1 }
            }
            (status, printed) = try await runDeltasnap(sync)
            #expect(status == 0, "seed \(seed): \(printed)")

            // No write was turned down (a record pushed before its blob would be: blob-missing).
            #expect(try files.conflicts().isEmpty, "seed \(seed)")
            // Every record reached the server, after its blob, and the blob is the file's bytes.
            let records = try await harness.serverRecords()
            var distinct = Set<BlobHash>()
            for (id, hash) in originals {
                #expect(records[id]?.contains(hash.hex) == true, "seed \(seed): \(id) is not on the server with its blob's reference")
                #expect(try await harness.store.blob(hash) != nil, "seed \(seed): the server lacks the blob of \(id)")
                distinct.insert(hash)
            }
            // The replica's blobs: each file under a blob's name is that blob, whole.
            let directory = URL(fileURLWithPath: store.path + "-blobs")
            var named = 0
            for entry in try FileManager.default.contentsOfDirectory(atPath: directory.path) where entry.count == 64 {
                let bytes = try Data(contentsOf: directory.appendingPathComponent(entry))
                #expect(BlobHash.of(Array(bytes)).hex == entry, "seed \(seed): \(entry) holds other bytes")
                named += 1
            }
            #expect(named == distinct.count, "seed \(seed)")
            let metrics = try String(contentsOf: URL(string: "http://127.0.0.1:\(harness.serverPort)/metrics")!, encoding: .utf8)
            let uploads =
                metrics.split(separator: "\n").first { $0.hasPrefix("deltasnap_blob_uploads_total ") }.flatMap { Int($0.split(separator: " ")[1]) } ?? 0
            #expect(uploads == distinct.count, "seed \(seed): \(uploads) uploads stored for \(distinct.count) blobs: some were uploaded twice")
            let resumed =
                metrics.split(separator: "\n").first { $0.hasPrefix("deltasnap_blob_uploads_resumed_total ") }.flatMap { Int($0.split(separator: " ")[1]) }
                ?? 0

            // Downloads killed at random moments: the output file is absent or whole, never partial.
            let reader = harness.directory.appendingPathComponent("reader.sqlite").path
            (status, _) = try await runDeltasnap(["sync", "--store", reader, "--snapshot", snapshot.path, "--url", harness.apiURL().absoluteString])
            var downloadsKilled = 0
            let hashes = distinct.sorted()
            for iteration in 0..<crashIterations {
                let hash = hashes[iteration % hashes.count]
                let out = harness.directory.appendingPathComponent("download-\(iteration)").path
                let process = try ChildProcess(
                    try deltasnapExecutable(), ["blob", "--store", reader, hash.hex, "--out", out, "--url", harness.apiURL().absoluteString])
                try await Task.sleep(for: .milliseconds(Int.random(in: 0...150, using: &random)))
                if await process.stop(SIGKILL) != 0 { downloadsKilled += 1 }
                if let bytes = FileManager.default.contents(atPath: out) {
                    #expect(BlobHash.of(Array(bytes)) == hash, "seed \(seed): \(out) is a partial or other file")
                }
            }
            let leftovers = try FileManager.default.contentsOfDirectory(atPath: harness.directory.path).filter { $0.hasPrefix(".download-") }.count

            // Syncs with --eager-blobs killed at random moments: each resumes what the one before
            // left (the mark of what to download survives a kill), and in the end every blob is there whole.
            let eager = harness.directory.appendingPathComponent("eager.sqlite").path
            let eagerSync = ["sync", "--store", eager, "--snapshot", snapshot.path, "--url", harness.apiURL().absoluteString, "--eager-blobs", items]
            // A third as many as the other phases: each is a whole process start (the suite shares two cores).
            let eagerIterations = max(5, crashIterations / 3)
            var eagerKilled = 0
            for _ in 0..<eagerIterations {
                let process = try ChildProcess(try deltasnapExecutable(), eagerSync)
                try await Task.sleep(for: .milliseconds(Int.random(in: 0...150, using: &random)))
                if await process.stop(SIGKILL) != 0 { eagerKilled += 1 }
            }
            (status, printed) = try await runDeltasnap(eagerSync)
            #expect(status == 0, "seed \(seed): \(printed)")
            let eagerBlobs = eager + "-blobs"
            var held = 0
            for entry in try FileManager.default.contentsOfDirectory(atPath: eagerBlobs) where entry.count == 64 {
                let bytes = try Data(contentsOf: URL(fileURLWithPath: "\(eagerBlobs)/\(entry)"))
                #expect(BlobHash.of(Array(bytes)).hex == entry, "seed \(seed): \(entry) holds other bytes")
                held += 1
            }
            #expect(held == distinct.count, "seed \(seed): \(held) of \(distinct.count) blobs downloaded eagerly")
            let partials = (try? FileManager.default.contentsOfDirectory(atPath: "\(eagerBlobs)/partial")) ?? []
            #expect(partials.isEmpty, "seed \(seed): partial downloads left: \(partials)")
            print(
                "BlobCrashTests: seed \(seed): \(killed) of \(crashIterations) syncs killed, \(originals.count) records, "
                    + "\(distinct.count) blobs, \(uploads) uploads counted by the server (\(resumed) resumed from the bytes kept); \(downloadsKilled) of \(crashIterations) downloads killed, \(leftovers) hidden temporary files left by them; "
                    + "\(eagerKilled) of \(eagerIterations) eager syncs killed, \(held) blobs held after"
            )
        }
    }
}

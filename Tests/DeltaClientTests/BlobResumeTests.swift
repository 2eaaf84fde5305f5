import DeltaClient
import DeltaCore
import DeltaTestSupport
import Foundation
import Testing

@Suite("Blob downloads resume with Range after a cut; transfers report their progress")
struct BlobResumeTests {
    static let size = 12 << 20

    @Test(
        "A download cut off halfway asks only for the rest (206), reports from where it resumed, and ends with the right bytes; a partial file that does not match starts over"
    )
    func resumeAfterCut() async throws {
        try await withHarness { harness in
            let (snapshot, bytes, reference, sent) = try await Self.uploadBigBlob(harness, test: "resumeAfterCut")
            #expect(
                sent.first?.direction == .upload
                    && sent.last == BlobTransfer(hash: reference.hash, direction: .upload, bytes: Int64(Self.size), total: Int64(Self.size), isFinished: true))

            // A slow second piece (nginx, 512 KB/s) so that the cut lands halfway.
            let directory = harness.directory.appendingPathComponent("nginx").path
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            let (nginx, port) = try await Self.startNginx(directory: directory, upstream: harness.serverPort)
            defer { Task { await nginx.stop(SIGKILL) } }
            var configuration = harness.configuration("reader", snapshot: snapshot)
            configuration.serverURL = URL(string: "http://127.0.0.1:\(port)/api")!
            let reader = try await Replica.open(configuration)
            let partial = configuration.storeURL.path + "-blobs/partial/\(reference.hash.hex).download"
            // Pieces of 8 MiB: the cut lands in the second, after the first is kept.
            let cut = Task { try await reader.blob(reference) }
            let deadline = ContinuousClock.now + .seconds(60)
            while Self.fileSize(partial) == 0 && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(10)) }
            cut.cancel()
            await #expect(throws: (any Error).self) { _ = try await cut.value }
            let held = Self.fileSize(partial)
            #expect(held == 8 << 20, "cut with \(held) bytes kept")

            // Subscribed on this task, before the download: the stream keeps its newest reports.
            let stream = reader.blobTransfers()
            let progress = Task { await Self.collect(stream, until: { $0.isFinished }) }
            let file = try await reader.blob(reference)
            #expect(try Data(contentsOf: file) == bytes)
            #expect(!FileManager.default.fileExists(atPath: partial))
            let reports = await progress.value
            #expect(reports.first.map { $0.bytes >= held && $0.direction == .download } == true, "resumed from \(held): \(reports.prefix(2))")
            #expect(zip(reports, reports.dropFirst()).allSatisfy { $0.bytes <= $1.bytes } && reports.last?.isFinished == true && reports.last?.fraction == 1)
            var log = try Self.blobRequests(directory)
            #expect(log.first == "bytes=0-\((8 << 20) - 1) 206 \(8 << 20)", "\(log)")
            // The cut request (nginx may log it after this point) and the resumed one ask for the rest, never from 0.
            #expect(log.last == "bytes=\(held)-\(Self.size - 1) 206 \(Self.size - held)", "\(log)")
            #expect(log.dropFirst().allSatisfy { $0.hasPrefix("bytes=\(held)-") }, "only the rest: \(log)")

            // Another replica whose partial file holds wrong bytes: the resumed whole does not
            // match, so it starts over and still ends right.
            var other = configuration
            other.storeURL = harness.directory.appendingPathComponent("other.sqlite")
            let stale = other.storeURL.path + "-blobs/partial/\(reference.hash.hex).download"
            try FileManager.default.createDirectory(atPath: other.storeURL.path + "-blobs/partial", withIntermediateDirectories: true)
            try Data(repeating: 7, count: 1 << 20).write(to: URL(fileURLWithPath: stale))
            let second = try await Replica.open(other)
            #expect(try Data(contentsOf: try await second.blob(reference)) == bytes)
            log = try Self.blobRequests(directory)
            let mib = 1 << 20
            #expect(
                log.filter { !$0.contains(" 499 ") }.suffix(3) == [
                    "bytes=\(mib)-\(9 * mib - 1) 206 \(8 * mib)", "bytes=\(9 * mib)-\(Self.size - 1) 206 \(Self.size - 9 * mib)", "- 200 \(Self.size)",
                ],
                "resumed from the stale bytes, then whole: \(log)")
        }
    }

    @Test("A cache that ignores Range and answers 200 with other bytes: one whole retry, then a clear error, never a loop")
    func wholeAnswersEndTheDownload() async throws {
        try await withHarness { harness in
            try await harness.put(#"{"id":"seed"}"#)
            let snapshot = try await harness.bake("base")
            let directory = harness.directory.appendingPathComponent("nginx").path
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            let (nginx, port) = try await Self.startNginx(directory: directory, upstream: harness.serverPort, blobs: #"return 200 "not the blob";"#)
            defer { Task { await nginx.stop(SIGKILL) } }
            var configuration = harness.configuration("reader", snapshot: snapshot)
            configuration.serverURL = URL(string: "http://127.0.0.1:\(port)/api")!
            let reader = try await Replica.open(configuration)
            let reference = BlobReference(hash: BlobHash.of(Array(repeating: 1, count: 20 << 20)), size: 20 << 20, type: "application/octet-stream")
            do {
                _ = try await reader.blob(reference)
                Issue.record("a wrong answer was kept")
            } catch let error as ReplicaError {
                #expect(error.kind == .unusableAnswer, "\(error)")
            }
            let log = try Self.blobRequests(directory)
            #expect(log == ["bytes=0-\((8 << 20) - 1) 200 12", "- 200 12"], "\(log)")
        }
    }

    @Test("deltasnap blob --url killed halfway: run again, it asks only for the rest, and writes the right bytes")
    func commandResumesAfterKill() async throws {
        try await withHarness { harness in
            let (snapshot, bytes, reference, _) = try await Self.uploadBigBlob(harness, test: "commandResumesAfterKill")
            let directory = harness.directory.appendingPathComponent("nginx").path
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            let (nginx, port) = try await Self.startNginx(directory: directory, upstream: harness.serverPort)
            defer { Task { await nginx.stop(SIGKILL) } }
            let api = "http://127.0.0.1:\(port)/api"
            let store = harness.directory.appendingPathComponent("cli.sqlite").path
            var (status, printed) = try await runDeltasnap(["sync", "--store", store, "--snapshot", snapshot.path, "--url", api])
            #expect(status == 0, "\(printed)")
            let out = harness.directory.appendingPathComponent("big.bin").path
            let command = ["blob", "--store", store, reference.hash.hex, "--out", out, "--url", api]
            let partial = store + "-blobs/partial/\(reference.hash.hex).download"
            let process = try ChildProcess(try deltasnapExecutable(), command)
            let deadline = ContinuousClock.now + .seconds(60)
            while Self.fileSize(partial) == 0 && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(10)) }
            _ = await process.stop(SIGKILL)
            // The kill may land while a piece is appended: what is held is a prefix.
            let held = Self.fileSize(partial)
            #expect(held > 0 && held < Self.size && !FileManager.default.fileExists(atPath: out), "\(held) bytes kept")
            (status, printed) = try await runDeltasnap(command)
            #expect(status == 0 && printed == "\(out): downloaded \(reference.hash)\n", "\(printed)")
            #expect(FileManager.default.contents(atPath: out) == bytes)
            let log = try Self.blobRequests(directory).filter { $0 != "- 200 0" }
            #expect(log.first == "bytes=0-\((8 << 20) - 1) 206 \(8 << 20)", "\(log)")
            // After the first piece, every request asks from what the kill kept on, never from 0.
            let starts = log.dropFirst().compactMap { $0.split(separator: "-").first.flatMap { Int($0.dropFirst("bytes=".count)) } }
            #expect(starts.contains(held) && starts.allSatisfy { $0 >= held }, "only the rest after the kill (\(held) kept): \(log)")
        }
    }

    /// The server's snapshot, then a writer replica's record referencing `size` seeded random
    /// bytes, synced (the seed printed): the bytes, their reference, and the upload's reports.
    static func uploadBigBlob(_ harness: Harness, test: String) async throws -> (URL, Data, BlobReference, [BlobTransfer]) {
        try await harness.put(#"{"id":"seed"}"#)
        let snapshot = try await harness.bake("base")
        let seed = SeededGenerator.seed(for: "BlobResumeTests.\(test)")
        var random = SeededGenerator(seed: seed)
        let bytes = Data(random.bytes(size))
        let writer = try await Replica.open(harness.configuration("writer", snapshot: snapshot))
        let transfers = writer.blobTransfers()
        let uploads = Task { await collect(transfers, until: { $0.isFinished }) }
        let reference = try await writer.attach(bytes, type: "application/octet-stream")
        try await writer.put(try ReplicaBlobTests.record("big", "file", reference), in: items)
        _ = try await writer.sync()
        return (snapshot, bytes, reference, await uploads.value)
    }

    /// The reports of `stream` up to the first that `last` accepts (or 120 s).
    static func collect(_ stream: AsyncStream<BlobTransfer>, until last: @escaping @Sendable (BlobTransfer) -> Bool) async -> [BlobTransfer] {
        await withTaskGroup(of: [BlobTransfer]?.self) { group in
            group.addTask {
                var seen: [BlobTransfer] = []
                for await report in stream {
                    seen.append(report)
                    if last(report) { break }
                }
                return seen
            }
            group.addTask {
                try? await Task.sleep(for: .seconds(120))
                return nil
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            return first ?? []
        }
    }

    static func fileSize(_ path: String) -> Int { (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) ?? 0 }

    /// nginx's log of blob requests: `RANGE STATUS BYTES_SENT`.
    static func blobRequests(_ directory: String) throws -> [String] {
        try String(contentsOfFile: "\(directory)/blobs.log", encoding: .utf8).split(separator: "\n").map(String.init)
    }

    /// nginx in front of the server. By default a blob's second piece (a range from 8 MiB on)
    /// passes at 512 KB/s and every other request at full speed: a test that cuts or kills a
    /// download once its first piece is kept then has 8 s to do it, even when its task waits
    /// seconds for a thread, and the rest of the test is not slowed.
    static func startNginx(
        directory: String, upstream: Int, blobs: String = "limit_rate $blob_rate; proxy_pass http://127.0.0.1:UPSTREAM; proxy_http_version 1.1;"
    ) async throws -> (ChildProcess, Int) {
        let nginx = try requireProgram("nginx", package: "nginx-light")
        let config = "\(directory)/nginx.conf"
        return try await startListening { port in
            try nginxConfiguration(
                directory: directory, connections: 64,
                http: """
                        log_format ranges '$http_range $status $body_bytes_sent';
                        map $http_range $blob_rate {
                            "~^bytes=8388608-" 512k;
                            default 0;
                        }
                        server {
                            listen 127.0.0.1:\(port);
                            location /blobs/ {
                                access_log \(directory)/blobs.log ranges;
                                \(blobs.replacingOccurrences(of: "UPSTREAM", with: String(upstream)))
                            }
                            location / {
                                proxy_pass http://127.0.0.1:\(upstream);
                                proxy_http_version 1.1;
                            }
                        }
                    """
            ).write(toFile: config, atomically: true, encoding: .utf8)
            return try ChildProcess(nginx, ["-c", config, "-p", directory])
        }
    }
}

import DeltaCore
import DeltaTestSupport
import Foundation
import Testing

@Suite("A large blob through the client as real processes", .enabled(if: largeBlobRun, "run by Scripts/reliability.sh (DELTASNAP_BLOB_TEST_MIB), alone"))
struct ClientBlobMemoryTests {
    /// The blob's size: `DELTASNAP_BLOB_TEST_MIB`, 128 MiB by default, already more than the
    /// memory bound (`Scripts/reliability.sh` runs 1 GiB alone, with the server's BlobMemoryTests).
    static let mebibytes = Int(ProcessInfo.processInfo.environment["DELTASNAP_BLOB_TEST_MIB"] ?? "") ?? 128
    static let key = "client-memory-key"

    @Test("put --attach, sync (upload), and another replica's sync --eager-blobs (download): the bytes equal, each client process's peak memory under 100 MB")
    func largeThroughClient() async throws {
        let time = try requireProgram("time", package: "time")
        _ = try requireProgram("openssl", package: "openssl")
        let directory = try makeTemporaryDirectory("client-blob-memory")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let db = "\(directory)/server.sqlite"
        let server = try ChildProcess(
            try deltasnapExecutable(),
            ["serve", "--db", db, "--port", "0", "--max-blob-size", "2GiB", "--client-key", Self.key, "--client-writable", "videos"],
            environment: ["DELTASNAP_WRITE_TOKEN": "client-memory-secret"])
        defer { Task { await server.stop(SIGKILL) } }
        let port = try await server.announcedPort()
        let api = "http://127.0.0.1:\(port)/api"
        let video = "\(directory)/video.mp4"
        let (made, madeOutput) = try await runProgram(
            "/bin/bash",
            [
                "-c",
                "set -o pipefail; { openssl enc -aes-128-ctr -nosalt -K 000102030405060708090a0b0c0d0e0f -iv 0 -in /dev/zero 2>/dev/null || true; } | head -c \(Self.mebibytes << 20) > \(video)",
            ])
        #expect(made == 0, "\(madeOutput)")
        let hash = try ReplicaBlobsProbe.sha256(video)

        // A snapshot of the collection, for both replicas.
        try #"{"id":"seed"}"#.write(toFile: "\(directory)/seed.json", atomically: true, encoding: .utf8)
        var (status, printed) = try await runDeltasnap(["import", "--db", db, "--collection", "videos", "\(directory)/seed.json"])
        #expect(status == 0, "\(printed)")
        let snapshot = "\(directory)/videos.snapshot"
        (status, printed) = try await runDeltasnap(["bake", "--url", "\(api)/videos", "--out", snapshot])
        #expect(status == 0, "\(printed)")

        var peaks: [String: Int] = [:]
        func measured(_ label: String, _ arguments: [String]) async throws -> String {
            let child = try ChildProcess(time, ["-f", "peak-kb %M"] + [try deltasnapExecutable()] + arguments)
            let status = await child.stop(0, timeout: .seconds(900))
            let printed = child.printed
            #expect(status == 0, "\(label): \(printed.suffix(500))")
            peaks[label] = printed.split(separator: "\n").last { $0.hasPrefix("peak-kb ") }.flatMap { Int($0.dropFirst(8)) } ?? Int.max
            return printed
        }
        let writer = "\(directory)/writer.sqlite"
        let reader = "\(directory)/reader.sqlite"
        let common = ["--snapshot", snapshot, "--url", "\(api)/videos", "--client-key", Self.key]
        _ = try await measured("sync", ["sync", "--store", writer] + common)
        let record = "\(directory)/v1.json"
        try #"{"id":"v1"}"#.write(toFile: record, atomically: true, encoding: .utf8)
        let attached = try await measured("put --attach", ["put", "--store", writer, "--collection", "videos", "--attach", "video=\(video)", record])
        #expect(attached.contains("attached as \(hash) (\(Self.mebibytes << 20) bytes, video/mp4)"), "\(attached)")
        let pushed = try await measured("sync (upload)", ["sync", "--store", writer] + common)
        #expect(pushed.contains("pushed: 1 applied"), "\(pushed)")
        _ = try await measured("sync --eager-blobs (download)", ["sync", "--store", reader, "--eager-blobs", "videos"] + common)
        #expect(try ReplicaBlobsProbe.sha256("\(reader)-blobs/\(hash)") == hash, "the reader holds the same bytes")

        print("ClientBlobMemoryTests: \(Self.mebibytes) MiB, peak memory (KB) by process: \(peaks.sorted { $0.key < $1.key })")
        for (label, peak) in peaks { #expect(peak < 100_000, "\(label): \(peak) KB") }
    }
}

/// SHA-256 of a file, by `openssl` (fast whatever the build).
enum ReplicaBlobsProbe {
    static func sha256(_ path: String) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: try requireProgram("openssl", package: "openssl"))
        process.arguments = ["dgst", "-sha256", "-r", path]
        let pipe = Pipe()
        process.standardOutput = pipe
        try process.run()
        let output = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return String(String(decoding: output, as: UTF8.self).prefix(64))
    }
}

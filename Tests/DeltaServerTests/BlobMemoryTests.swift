import DeltaCore
import DeltaTestSupport
import Foundation
import Testing

@Suite("A large blob through deltasnap serve as a real process", .enabled(if: largeBlobRun, "run by Scripts/reliability.sh (DELTASNAP_BLOB_TEST_MIB), alone"))
struct BlobMemoryTests {
    /// The blob's size: `DELTASNAP_BLOB_TEST_MIB`, 128 MiB by default, already more than the
    /// memory bound, so a server holding a whole blob fails (`Scripts/reliability.sh` runs 1 GiB
    /// alone: beside the whole suite, a gigabyte written on each backend stalled other tests'
    /// fsyncs and process starts for tens of seconds).
    static let mebibytes = Int(ProcessInfo.processInfo.environment["DELTASNAP_BLOB_TEST_MIB"] ?? "") ?? 128

    /// A shell pipeline that writes the blob's bytes: an AES-CTR keystream, the same every time,
    /// made as fast as it is read, so the test's side never stores the blob on disk.
    static var bytes: String {
        "{ openssl enc -aes-128-ctr -nosalt -K 000102030405060708090a0b0c0d0e0f -iv 0 -in /dev/zero 2>/dev/null || true; } | head -c \(mebibytes << 20)"
    }

    /// Runs `pipeline` with `bash -c` (pipefail); its output, trimmed, or a failure naming it.
    static func shell(_ pipeline: String) async throws -> String {
        let (status, printed) = try await runProgram("/bin/bash", ["-c", "set -o pipefail; " + pipeline])
        guard status == 0 else { throw TestFailure("\(pipeline): exit \(status): \(printed.prefix(300))") }
        return printed.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// The SHA-256 (hex) of what `pipeline` writes, by `openssl` (SHA instructions, where the CPU has them).
    static func sha256(_ pipeline: String) async throws -> String {
        String(try await shell("\(pipeline) | openssl dgst -sha256 -r").prefix(64))
    }

    @Test("Streamed up with curl (chunked), down whole and in two ranges: the bytes equal, the server's peak memory under 100 MB", arguments: Backend.available)
    func large(backend: Backend) async throws {
        _ = try requireProgram("curl", package: "curl")
        _ = try requireProgram("openssl", package: "openssl")
        let directory = try makeTemporaryDirectory("blob-memory")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let database = try await backend.makeDatabase(in: URL(fileURLWithPath: directory))
        defer { Task { await database.remove() } }
        let hash = try await Self.sha256(Self.bytes)
        let server = try ChildProcess(
            try deltasnapExecutable(), ["serve", "--db", database.location, "--port", "0", "--max-blob-size", "2GiB"],
            environment: ["DELTASNAP_WRITE_TOKEN": secret])
        let port = try await server.announcedPort()
        let url = "http://127.0.0.1:\(port)/blobs/\(hash)"
        let auth = "'Authorization: Bearer \(secret)'"
        let size = Self.mebibytes << 20
        let upload = try await Self.shell("\(Self.bytes) | curl -sS --fail-with-body -T - -H \(auth) -H 'Content-Type: video/mp4' \(url)")
        #expect(upload == #"{"$blob":"\#(hash)","size":\#(size),"type":"video/mp4"}"#, "\(upload)")
        let record = #"{"id":"v","video":{"$blob":"\#(hash)","size":\#(size),"type":"video/mp4"}}"#
        _ = try await Self.shell(
            "curl -sS --fail-with-body -X PUT -H \(auth) -H 'Content-Type: application/json' --data '\(record)' http://127.0.0.1:\(port)/api/videos/v")
        #expect(try await Self.sha256("curl -sS --fail \(url)") == hash)
        // A download cut halfway, resumed with a Range from where it stopped.
        let half = size / 2
        #expect(try await Self.sha256("{ curl -sS --fail -r 0-\(half - 1) \(url) && curl -sS --fail -r \(half)- \(url); }") == hash)

        let status = try String(contentsOfFile: "/proc/\(server.pid)/status", encoding: .utf8)
        let peak = status.split(separator: "\n").first { $0.hasPrefix("VmHWM:") }.flatMap { Int($0.split(separator: " ")[1]) } ?? Int.max
        print("BlobMemoryTests[\(backend)]: \(Self.mebibytes) MiB up and down twice, server peak memory \(peak / 1024) MB")
        #expect(peak < 100 * 1024, "the server's peak memory was \(peak / 1024) MB")
        #expect(await server.stop(SIGTERM) == 0)
    }
}

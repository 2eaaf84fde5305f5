import DeltaCore
import DeltaTestSupport
import Foundation
import Testing

@Suite("A gigabyte blob through deltasnap serve as a real process")
struct BlobMemoryTests {
    /// The blob's size: `DELTASNAP_BLOB_TEST_MIB`, 1 GiB by default.
    static let mebibytes = Int(ProcessInfo.processInfo.environment["DELTASNAP_BLOB_TEST_MIB"] ?? "") ?? 1_024

    /// The SHA-256 of a file, by `openssl` (SHA instructions, where the CPU has them).
    static func sha256(_ path: String) async throws -> String {
        let (status, printed) = try await runProgram(try requireProgram("/usr/bin/openssl", package: "openssl"), ["dgst", "-sha256", "-r", path])
        guard status == 0, let hex = printed.split(separator: " ").first, hex.count == 64 else { throw TestFailure("openssl dgst \(path): \(printed)") }
        return String(hex)
    }

    @Test(
        "Uploaded with curl, downloaded whole and in two resumed ranges: the bytes equal, the server's peak memory under 100 MB", arguments: Backend.available)
    func gigabyte(backend: Backend) async throws {
        let curl = try requireProgram("/usr/bin/curl", package: "curl")
        let directory = try makeTemporaryDirectory("blob-memory")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let database = try await backend.makeDatabase(in: URL(fileURLWithPath: directory))
        defer { Task { await database.remove() } }
        let source = "\(directory)/source.bin"
        let made = try await runProgram("/bin/sh", ["-c", "head -c \(Self.mebibytes << 20) /dev/urandom > \(source)"])
        #expect(made.status == 0)
        let hash = try await Self.sha256(source)
        let server = try ChildProcess(
            try deltasnapExecutable(), ["serve", "--db", database.location, "--port", "0", "--max-blob-size", "2GiB"],
            environment: ["DELTASNAP_WRITE_TOKEN": secret])
        let port = try await server.announcedPort()
        let base = "http://127.0.0.1:\(port)"
        let auth = "Authorization: Bearer \(secret)"
        let upload = try await runProgram(
            curl, ["-sS", "--fail-with-body", "-T", source, "-H", auth, "-H", "Content-Type: video/mp4", "\(base)/blobs/\(hash)"])
        #expect(upload.status == 0 && upload.printed == #"{"$blob":"\#(hash)","size":\#(Self.mebibytes << 20),"type":"video/mp4"}"# + "\n", "\(upload.printed)")
        let record = #"{"id":"v","video":{"$blob":"\#(hash)","size":\#(Self.mebibytes << 20),"type":"video/mp4"}}"#
        let write = try await runProgram(
            curl, ["-sS", "--fail-with-body", "-X", "PUT", "-H", auth, "-H", "Content-Type: application/json", "--data", record, "\(base)/api/videos/v"])
        #expect(write.status == 0, "\(write.printed)")

        let whole = "\(directory)/whole.bin"
        #expect(try await runProgram(curl, ["-sS", "--fail", "-o", whole, "\(base)/blobs/\(hash)"]).status == 0)
        #expect(try await Self.sha256(whole) == hash)
        try? FileManager.default.removeItem(atPath: whole)
        // A download cut halfway, resumed with a Range from where it stopped.
        let half = (Self.mebibytes << 20) / 2
        let resumed = "\(directory)/resumed.bin"
        #expect(try await runProgram(curl, ["-sS", "--fail", "-r", "0-\(half - 1)", "-o", resumed, "\(base)/blobs/\(hash)"]).status == 0)
        #expect(try await runProgram(curl, ["-sS", "--fail", "-C", "-", "-o", resumed, "\(base)/blobs/\(hash)"]).status == 0)
        #expect(try await Self.sha256(resumed) == hash)

        let status = try String(contentsOfFile: "/proc/\(server.pid)/status", encoding: .utf8)
        let peak = status.split(separator: "\n").first { $0.hasPrefix("VmHWM:") }.flatMap { Int($0.split(separator: " ")[1]) } ?? Int.max
        print("BlobMemoryTests[\(backend)]: \(Self.mebibytes) MiB up and down twice, server peak memory \(peak / 1024) MB")
        #expect(peak < 100 * 1024, "the server's peak memory was \(peak / 1024) MB")
        #expect(await server.stop(SIGTERM) == 0)
    }
}

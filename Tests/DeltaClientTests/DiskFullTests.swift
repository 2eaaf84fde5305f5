import DeltaClient
import DeltaCore
import DeltaTestSupport
import Foundation
import Testing

/// A small file system of its own (tmpfs), for a replica to run out of space on.
struct SmallFileSystem {
    let directory: URL

    /// Whether this machine lets the tests mount one (root, or CAP_SYS_ADMIN).
    static let available: Bool = {
        guard let probe = try? SmallFileSystem(megabytes: 1) else { return false }
        probe.unmount()
        return true
    }()

    init(megabytes: Int) throws {
        directory = URL(fileURLWithPath: try makeTemporaryDirectory("deltaclient-full"))
        let mount = Process()
        mount.executableURL = URL(fileURLWithPath: "/bin/mount")
        mount.arguments = ["-t", "tmpfs", "-o", "size=\(megabytes)m", "tmpfs", directory.path]
        mount.standardError = FileHandle.nullDevice
        try mount.run()
        mount.waitUntilExit()
        guard mount.terminationStatus == 0 else {
            try? FileManager.default.removeItem(at: directory)
            throw TestFailure("mount -t tmpfs: exit \(mount.terminationStatus)")
        }
    }

    /// Fills what is left with one file; returns it (remove it to free the space).
    func fill() throws -> URL {
        let filler = directory.appendingPathComponent("filler")
        guard FileManager.default.createFile(atPath: filler.path, contents: nil) else { throw TestFailure("cannot create \(filler.path)") }
        let handle = try FileHandle(forWritingTo: filler)
        defer { try? handle.close() }
        let chunk = Data(count: 64 << 10)
        while (try? handle.write(contentsOf: chunk)) != nil {}
        // The last bytes, one at a time, until not one more fits.
        while (try? handle.write(contentsOf: Data(count: 1))) != nil {}
        return filler
    }

    func unmount() {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/umount")
        process.arguments = [directory.path]
        try? process.run()
        process.waitUntilExit()
        try? FileManager.default.removeItem(at: directory)
    }
}

@Suite("A full disk: reads go on, a sync says what happened with .diskFull, and succeeds once there is space")
struct DiskFullTests {
    @Test("A forced sync that succeeds on a full disk ends the back-off even though it cannot clear it in the store", .enabled(if: SmallFileSystem.available))
    func forcedSuccessEndsBackoff() async throws {
        try await withHarness { harness in
            try await harness.put(#"{"id":"a"}"#)
            let snapshot = try await harness.bake("v1")
            let disk = try SmallFileSystem(megabytes: 8)
            defer { disk.unmount() }
            var configuration = harness.configuration(snapshot: snapshot, viaProxy: true)
            configuration.storeURL = disk.directory.appendingPathComponent("replica.sqlite")
            configuration.initialBackoff = 600
            let replica = try await Replica.open(configuration)
            harness.proxy.plan(.status(503, retryAfter: nil))
            let failed = await #expect(throws: ReplicaError.self) { try await replica.sync() }
            #expect(failed?.kind == .serverUnavailable)
            _ = try disk.fill()
            // Nothing changed on the server: the forced sync writes no data, only its bookkeeping.
            #expect(try await replica.sync(force: true).collections.first?.outcome == .notModified)
            #expect(try await replica.sync().collections.first?.outcome == .notModified)
        }
    }

    @Test("A store whose process exited before the disk filled opens and reads in a new process", .enabled(if: SmallFileSystem.available))
    func coldStartOnFullDisk() async throws {
        try await withHarness { harness in
            try await harness.putMany((0..<200).map { #"{"id":"a\#($0)"}"# })
            let snapshot = try await harness.bake("v1")
            let disk = try SmallFileSystem(megabytes: 8)
            defer { disk.unmount() }
            let store = disk.directory.appendingPathComponent("cli.sqlite").path
            var (status, printed) = try await runDeltasnap(["sync", "--store", store, "--snapshot", snapshot.path, "--url", harness.apiURL().absoluteString])
            #expect(status == 0, "\(printed)")
            _ = try disk.fill()
            (status, printed) = try await runDeltasnap(["dump", "--store", store, "--collection", items])
            #expect(status == 0, "\(printed.prefix(500))")
            #expect(printed.split(separator: "\n").count == 200)
            (status, printed) = try await runDeltasnap(["query", "--store", store, "--collection", items, "--filter", #"{"id":{"eq":"a7"}}"#])
            #expect(status == 0, "\(printed.prefix(500))")
            // A sync has no space to write: it says so, and the store is as it was.
            try await harness.put(#"{"id":"b"}"#)
            (status, printed) = try await runDeltasnap(["sync", "--store", store, "--snapshot", snapshot.path, "--url", harness.apiURL().absoluteString])
            #expect(status == 75, "\(printed)")
            #expect(printed.contains("disk full:"), "\(printed)")
            (status, printed) = try await runDeltasnap(["dump", "--store", store, "--collection", items])
            #expect(printed.split(separator: "\n").count == 200)
        }
    }

    @Test(
        "A replica on a full file system: reads, queries and a relaunch work; syncs and writes fail with .diskFull and change nothing half-way; space back, all syncs",
        .enabled(if: SmallFileSystem.available))
    func fullDisk() async throws {
        try await withHarness { harness in
            try await harness.putMany((0..<200).map { #"{"id":"a\#($0)","text":"\#(String(repeating: "x", count: 100))"}"# })
            let snapshot = try await harness.bake("v1")
            let disk = try SmallFileSystem(megabytes: 32)
            defer { disk.unmount() }
            var configuration = harness.configuration(snapshot: snapshot)
            configuration.storeURL = disk.directory.appendingPathComponent("replica.sqlite")
            configuration.indexes = [items: ["text"]]
            var replica: Replica? = try await Replica.open(configuration)
            try await replica!.sync()
            // The server gains 6,000 records: a delta far larger than the space left.
            try await harness.putMany((0..<6_000).map { #"{"id":"b\#($0)","text":"\#(String(repeating: "y", count: 300))"}"# })
            // A write queued before the disk filled: its push reaches the server, its answer
            // cannot be noted; it is sent again, and answered from the server's record, later.
            try await replica!.put(try record(#"{"id":"queued"}"#), in: items)
            let filler = try disk.fill()
            let failure = await #expect(throws: ReplicaError.self) { try await replica!.sync() }
            #expect(failure?.kind == .diskFull, "\(String(describing: failure))")
            // The state before: all of it or none of it.
            #expect(try await replica!.count(in: items) == 201)
            #expect(try await replica!.query(items, filter: .compare(member: "text", .eq, .string(String(repeating: "x", count: 100)))).count == 200)
            // A local write cannot be kept either: refused whole, with the same kind.
            let write = await #expect(throws: ReplicaError.self) { try await replica!.put(try record(#"{"id":"mine"}"#), in: items) }
            #expect(write?.kind == .diskFull, "\(String(describing: write))")
            // Another process on the full disk (the widget, a tool, the app relaunched) reads it.
            let (status, dumped) = try await runDeltasnap(["dump", "--store", configuration.storeURL.path, "--collection", items])
            #expect(status == 0, "\(dumped.prefix(500))")
            #expect(dumped.split(separator: "\n").count == 201, "\(dumped.suffix(400))")
            // A relaunch on the full disk opens the store and reads it.
            replica = nil
            let reopened = try await Replica.open(configuration)
            #expect(try await reopened.count(in: items) == 201)
            #expect(try await reopened.record("a7", in: items) != nil)
            // Space back: the next sync (forced past the back-off) brings everything.
            try FileManager.default.removeItem(at: filler)
            try await reopened.sync(force: true)
            #expect(try await reopened.count(in: items) == 6_201)
            #expect(try await reopened.contents() == (try await harness.serverRecords()))
            try await reopened.put(try record(#"{"id":"mine"}"#), in: items)
            #expect(try await reopened.sync().pushed.applied == 1)
        }
    }
}

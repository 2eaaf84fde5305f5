import DeltaCore
import DeltaTestSupport
import Foundation
import Testing

@Suite("The committed demo snapshot and Scripts/bake-snapshot.sh")
struct SampleSnapshotTests {
    let directory: String

    init() throws {
        directory = try makeTemporaryDirectory("deltasnap-sample")
    }

    @Test("Baking the demo source again reproduces Snapshots/demo.snapshot byte for byte, from either backend", arguments: Backend.available)
    func reproducesSample(backend: Backend) async throws {
        let database = try await backend.makeDatabase(in: URL(fileURLWithPath: directory))
        defer { Task { await database.remove() } }
        let db = database.location
        let id = try String(contentsOfFile: "Scripts/demo/database-id".fromPackageRoot, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(
            try await deltasnap(["import", "--db", db, "--collection", "widgets", "--database-id", id, "Scripts/demo/widgets.json".fromPackageRoot]).status == 0
        )
        let out = "\(directory)/demo.snapshot"
        #expect(try await deltasnap(["bake", "--db", db, "--collection", "widgets", "--out", out]).status == 0)
        let committed = try #require(FileManager.default.contents(atPath: "Snapshots/demo.snapshot".fromPackageRoot))
        #expect(
            FileManager.default.contents(atPath: out) == committed, "Snapshots/demo.snapshot no longer matches its source: re-bake it (see Snapshots/README.md)"
        )
    }

    /// Runs Scripts/bake-snapshot.sh from a copy of the package layout it needs.
    private func script(_ arguments: [String]) async throws -> (Int32, String) {
        let child = try ChildProcess(
            "/bin/bash", ["Scripts/bake-snapshot.sh".fromPackageRoot] + arguments,
            environment: ["DELTASNAP": try deltasnapExecutable()])
        let status = await child.stop(0, timeout: .seconds(120))
        return (status, child.printed)
    }

    @Test("The build-phase script replaces the snapshot only with a verified one, fails with one line, and keeps a stale one when asked")
    func bakeScript() async throws {
        let db = "\(directory)/server.sqlite"
        #expect(try await deltasnap(["import", "--db", db, "--collection", "widgets", "Scripts/demo/widgets.json".fromPackageRoot]).status == 0)
        let name = "test-\(UUID().uuidString.prefix(8))"
        let target = "Snapshots/\(name).snapshot".fromPackageRoot
        defer { try? FileManager.default.removeItem(atPath: target) }
        let (server, port) = try await startServer(db: db)
        let (status, output) = try await script(["http://127.0.0.1:\(port)/api/widgets", name])
        #expect(status == 0, "\(output)")
        #expect(output.contains("bake-snapshot: Snapshots/\(name).snapshot updated (6 records in 1 collections)"))
        let baked = try #require(FileManager.default.contents(atPath: target))
        await server.stop(SIGKILL)

        // Port 9 (discard), where nothing listens: the killed server's port may already serve another test.
        let unreachable = "http://127.0.0.1:9/api/widgets"
        let (failed, reason) = try await script([unreachable, name])
        #expect(failed == 1)
        #expect(reason.hasPrefix("error: bake-snapshot: \(unreachable): cannot reach the server"), "\(reason)")
        #expect(reason.split(separator: "\n").count == 1)
        #expect(FileManager.default.contents(atPath: target) == baked)

        let (stale, warning) = try await script(["--allow-stale", unreachable, name])
        #expect(stale == 0)
        #expect(warning.hasPrefix("warning: bake-snapshot: kept the previous Snapshots/\(name).snapshot"))
        #expect(FileManager.default.contents(atPath: target) == baked)
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: "Snapshots".fromPackageRoot).filter { $0.hasPrefix(".") }
        #expect(leftovers.isEmpty, "\(leftovers)")
    }
}

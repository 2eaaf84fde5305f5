import DeltaCore
import DeltaSQLite
import DeltaTestSupport
import Foundation
import HTTPTypes
import HummingbirdTesting
import Testing

/// Runs `deltasnap` with `arguments` to completion; returns its exit code and everything it printed.
func deltasnap(_ arguments: [String]) async throws -> (status: Int32, output: String) {
    let child = try ChildProcess(try deltasnapExecutable(), arguments)
    let status = await child.stop(0, timeout: .seconds(120))
    return (status, child.printed)
}

@Suite("deltasnap bake, verify and inspect")
struct BakeCommandTests {
    let directory: String

    init() throws {
        directory = try makeTemporaryDirectory("deltasnap-bake")
    }

    @Test("From the server and from its database, the same state bakes to the same bytes, carrying the server's exact validators", arguments: Backend.available)
    func bakeBothWays(backend: Backend) async throws {
        let database = try await backend.makeDatabase(in: URL(fileURLWithPath: directory))
        defer { Task { await database.remove() } }
        let db = database.location
        #expect(try await deltasnap(["import", "--db", db, "--collection", "widgets", "Scripts/demo/widgets.json".fromPackageRoot]).status == 0)
        let (server, port) = try await startServer(db: db)
        defer { Task { await server.stop(SIGKILL) } }
        let (first, second) = ("\(directory)/url.snapshot", "\(directory)/db.snapshot")
        let fromURL = try await deltasnap(["bake", "--url", "http://127.0.0.1:\(port)/api/widgets", "--out", first])
        #expect(fromURL.status == 0, "\(fromURL.output)")
        // Without the write secret the bake is not recorded on the server, and it says so.
        #expect(fromURL.output.contains("baked 6 records of widgets into \(first) ("), "\(fromURL.output)")
        #expect(fromURL.output.contains("bake: the baked token is not recorded on the server"), "\(fromURL.output)")
        #expect(try await deltasnap(["bake", "--db", db, "--collection", "widgets", "--out", second]).status == 0)
        #expect(FileManager.default.contents(atPath: first) == FileManager.default.contents(atPath: second))

        let inspected = try await deltasnap(["inspect", "--json", first])
        #expect(inspected.status == 0)
        let manifest = try JSONValue(parsing: Array(inspected.output.utf8))
        guard case .array(let collections) = manifest["collections"] else { throw TestFailure("no collections in \(inspected.output)") }
        let live = try await getOnce(port: port, "/api/widgets")
        #expect(collections.first?["etag"] == .string(live.header("ETag") ?? ""))
        #expect(collections.first?["lastModified"] == .string(live.header("Last-Modified") ?? ""))
        #expect(manifest["records"] == .number("6"))
        let verified = try await deltasnap(["verify", first])
        #expect(verified.output == "\(first): ok, 6 records in 1 collections\n")
    }

    @Test("Several collections from one database, in one consistent read")
    func severalCollections() async throws {
        let db = "\(directory)/many.sqlite"
        let file = "\(directory)/records.ndjson"
        try (0..<2_000).map { #"{"id":"r\#($0)","n":\#($0)}"# }.joined(separator: "\n").write(toFile: file, atomically: true, encoding: .utf8)
        for name in ["b", "a"] { #expect(try await deltasnap(["import", "--db", db, "--collection", name, file]).status == 0) }
        let out = "\(directory)/many.snapshot"
        #expect(try await deltasnap(["bake", "--db", db, "--collection", "b", "--collection", "a", "--out", out]).status == 0)
        var offset = 0
        let bytes = Array(FileManager.default.contents(atPath: out) ?? Data())
        let reader = try SnapshotReader {
            guard offset < bytes.count else { return nil }
            defer { offset += 4_096 }
            return Array(bytes[offset..<min(bytes.count, offset + 4_096)])
        }
        var counts: [String: Int] = [:]
        while let item = try reader.next() {
            if case .record(let collection, _) = item { counts[collection.rawValue, default: 0] += 1 }
        }
        #expect(counts == ["a": 2_000, "b": 2_000])
    }

    @Test("Failures say what is wrong, exit non-zero, and leave no file behind")
    func failures() async throws {
        let db = "\(directory)/f.sqlite"
        #expect(try await deltasnap(["import", "--db", db, "--collection", "widgets", "Scripts/demo/widgets.json".fromPackageRoot]).status == 0)
        let cases: [([String], String)] = [
            // Port 9 (discard): nothing listens there, whatever servers other tests start meanwhile.
            (["bake", "--url", "http://127.0.0.1:9/api/widgets", "--out", "\(directory)/x.snapshot"], "cannot reach the server"),
            (["bake", "--url", "ftp://host/api/widgets", "--out", "\(directory)/x.snapshot"], "--url: expected http://HOST:PORT/api/COLLECTION"),
            (["bake", "--db", "\(directory)/none.sqlite", "--collection", "widgets", "--out", "\(directory)/x.snapshot"], "none.sqlite: no such database"),
            (["bake", "--db", db, "--collection", "nothing", "--out", "\(directory)/x.snapshot"], "collection nothing: has no records"),
            (["bake", "--db", db, "--collection", "widgets", "--out", "\(directory)/missing/x.snapshot"], "cannot write (the folder"),
            (["bake", "--db", db, "--out", "\(directory)/x.snapshot"], "--db needs at least one --collection"),
            (["verify", "\(directory)/none.snapshot"], "cannot open for reading"),
        ]
        for (arguments, message) in cases {
            let result = try await deltasnap(arguments)
            #expect(result.status != 0, "\(arguments)")
            #expect(result.output.contains(message), "\(arguments): \(result.output)")
        }
        #expect(!FileManager.default.fileExists(atPath: "\(directory)/x.snapshot"))
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory).filter { $0.contains(".tmp-") }.isEmpty)

        let good = "\(directory)/good.snapshot"
        #expect(try await deltasnap(["bake", "--db", db, "--collection", "widgets", "--out", good]).status == 0)
        let bytes = try #require(FileManager.default.contents(atPath: good))
        try bytes.prefix(bytes.count - 3).write(to: URL(fileURLWithPath: "\(directory)/cut.snapshot"))
        let cut = try await deltasnap(["verify", "\(directory)/cut.snapshot"])
        #expect(cut.status != 0)
        #expect(cut.output.contains("the compressed stream is truncated"))
    }
}

extension String {
    /// This path taken from the package root (tests run from there under `swift test`, but not always).
    var fromPackageRoot: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent(self).path
    }
}

/// One GET on a fresh connection.
func getOnce(port: Int, _ path: String) async throws -> HTTPReply {
    try await TestClient.withClient(host: "127.0.0.1", port: port) { try await $0.send(path, .get) }
}

@Suite("deltasnap bake against answers that are not a full dataset")
struct BakeShapeTests {
    @Test("A 200 whose body is not {\"NAME\":[…]} of sorted visible records is refused, saying why")
    func wrongShapes() async throws {
        let nginx = try requireProgram("nginx", package: "nginx-light")
        let directory = try makeTemporaryDirectory("deltasnap-shapes")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try FileManager.default.createDirectory(atPath: "\(directory)/html/api", withIntermediateDirectories: true)
        let bodies = [
            "other": #"{"gadgets":[{"id":"a"}]}"#,
            "cut": #"{"cut":[{"id":"a"},{"id":"b""#,
            "unsorted": #"{"unsorted":[{"id":"b"},{"id":"a"}]}"#,
            "hidden": #"{"hidden":[{"id":"a","hidden":true}]}"#,
            "notrecords": #"{"notrecords":[1,2]}"#,
        ]
        for (name, body) in bodies { try body.write(toFile: "\(directory)/html/api/\(name)", atomically: true, encoding: .utf8) }
        let (server, port) = try await startListening { port in
            try Self.staticConfiguration(directory: directory, port: port).write(toFile: "\(directory)/nginx.conf", atomically: true, encoding: .utf8)
            return try ChildProcess(nginx, ["-c", "\(directory)/nginx.conf", "-p", directory])
        }
        defer { Task { await server.stop(SIGKILL) } }
        try FileManager.default.createDirectory(atPath: "\(directory)/html/plain/api", withIntermediateDirectories: true)
        try #"{"w":[]}"#.write(toFile: "\(directory)/html/plain/api/w", atomically: true, encoding: .utf8)
        let cases: [(String, String)] = [
            ("api/other", #"JSON: the body is not {"other":[…]} (it starts "{\"gadgets\""#),
            ("api/cut", "JSON: the body is truncated (no closing brace after record 0)"),
            ("api/unsorted", #"records are not sorted by id ("a" after "b")"#),
            ("api/hidden", "the full dataset holds a hidden record (a)"),
            ("api/notrecords", "record: must be a JSON object"),
            ("plain/api/w", "not a DeltaSnapshot full dataset (Delta-Mode: full, ETag and Last-Modified are required)"),
        ]
        for (path, message) in cases {
            let result = try await deltasnap(["bake", "--url", "http://127.0.0.1:\(port)/\(path)", "--out", "\(directory)/x.snapshot"])
            #expect(result.status != 0, "\(path)")
            #expect(result.output.contains(message), "\(path): \(result.output)")
        }
        #expect(!FileManager.default.fileExists(atPath: "\(directory)/x.snapshot"))
        await server.stop(SIGKILL)
    }

    /// nginx serving `directory/html` as static files on `port`.
    static func staticConfiguration(directory: String, port: Int) -> String {
        """
        daemon off; master_process off; worker_processes 1; pid \(directory)/nginx.pid; error_log \(directory)/error.log warn;
        events { worker_connections 16; }
        http { access_log off; client_body_temp_path \(directory)/b; proxy_temp_path \(directory)/p; fastcgi_temp_path \(directory)/f;
          uwsgi_temp_path \(directory)/u; scgi_temp_path \(directory)/s;
          server { listen 127.0.0.1:\(port); root \(directory)/html; default_type application/json;
            location /api/ { add_header Delta-Mode full; }
            location /plain/ { } } }
        """
    }
}

@Suite("Progress bars")
struct ProgressTests {
    @Test("import and bake draw a progress bar on a terminal (quiet otherwise: see the exact outputs above)")
    func onTerminal() async throws {
        let script = try requireProgram("script", package: "bsdutils")
        let directory = try makeTemporaryDirectory("deltasnap-progress")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let file = "\(directory)/records.ndjson"
        try (0..<50_000).map { #"{"id":"r\#($0)"}"# }.joined(separator: "\n").write(toFile: file, atomically: true, encoding: .utf8)
        let binary = try deltasnapExecutable()
        for (command, expected) in [
            ("\(binary) import --db \(directory)/p.sqlite --collection items \(file)", "\rimport items: "),
            ("\(binary) bake --db \(directory)/p.sqlite --collection items --out \(directory)/p.snapshot", "\rbake: "),
        ] {
            let child = try ChildProcess(script, ["-qec", command, "/dev/null"])
            #expect(await child.stop(0, timeout: .seconds(120)) == 0, "\(command)")
            let printed = child.printed
            #expect(printed.contains(expected), "\(command): \(printed.prefix(300))")
            #expect(printed.contains("records"))
        }
    }
}

import DeltaCore
import DeltaTestSupport
import Foundation
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

@Suite("deltasnap serve --blob-cache: PostgreSQL's blobs sent from local copies")
struct BlobFileCacheTests {
    @Test(
        "The first download reads the database and keeps a checked copy; later ones (and ranges) are sent from it; access is the database's, a public verdict kept a second",
        arguments: Backend.available.filter { $0 == .postgres })
    func copies(backend: Backend) async throws {
        let directory = try makeTemporaryDirectory("blob-file-cache")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let database = try await backend.makeDatabase(in: URL(fileURLWithPath: directory))
        defer { Task { await database.remove() } }
        let cache = "\(directory)/cache"
        let server = try ChildProcess(
            try deltasnapExecutable(), ["serve", "--db", database.location, "--port", "0", "--blob-cache", cache, "--blob-cache-size", "8MiB"],
            environment: ["DELTASNAP_WRITE_TOKEN": secret])
        defer { Task { await server.stop(SIGKILL) } }
        let base = URL(string: "http://127.0.0.1:\(try await server.announcedPort())")!
        let bytes = Data((0..<300_000).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ $0 >> 9) })
        let hash = BlobHash.of(Array(bytes))
        let blob = base.appendingPathComponent("blobs/\(hash.hex)")
        #expect(try await Self.send("PUT", blob, body: bytes, owner: true).status == 200)
        let record = #"{"id":"p","photo":{"$blob":"\#(hash.hex)","size":\#(bytes.count),"type":"image/png"}}"#
        #expect(try await Self.send("PUT", base.appendingPathComponent("api/photos/p"), body: Data(record.utf8), owner: true).status < 300)

        var (status, body) = try await Self.send("GET", blob)
        #expect(status == 200 && body == bytes)
        // The copy is checked and named after the answer's last byte went out: wait for it.
        let deadline = ContinuousClock.now + .seconds(10)
        while !FileManager.default.fileExists(atPath: "\(cache)/\(hash.hex)") && ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(10))
        }
        #expect(FileManager.default.contents(atPath: "\(cache)/\(hash.hex)") == bytes, "a checked copy is kept")
        #expect(try await Self.cacheHits(base) == 0)
        (status, body) = try await Self.send("GET", blob)
        #expect(status == 200 && body == bytes)
        (status, body) = try await Self.send("GET", blob, range: "bytes=1000-1999")
        #expect(status == 206 && body == bytes[1000..<2000])
        #expect(try await Self.cacheHits(base) == 2)

        // The record goes: the copy is still there, but once the public verdict this instance
        // keeps for a second has passed, the database says nobody may read the blob.
        let remembered = ContinuousClock.now
        #expect(try await Self.send("GET", blob).status == 200)
        #expect(try await Self.send("DELETE", base.appendingPathComponent("api/photos/p"), owner: true).status < 300)
        #expect(FileManager.default.fileExists(atPath: "\(cache)/\(hash.hex)"))
        let within = try await Self.send("GET", blob).status
        // Sent without a query while the verdict is kept (unless this machine took most of the second already).
        #expect(within == 200 || ContinuousClock.now - remembered > .milliseconds(900), "a public verdict is kept for a second")
        try await Task.sleep(for: .milliseconds(1_100))
        let hits = try await Self.cacheHits(base)
        #expect(try await Self.send("GET", blob).status == 404)
        #expect(try await Self.cacheHits(base) == hits)
    }

    @Test("--blob-cache with SQLite is refused, saying why")
    func sqliteRefused() async throws {
        let directory = try makeTemporaryDirectory("blob-file-cache-sqlite")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let (status, output) = try await deltasnap(["serve", "--db", "\(directory)/db.sqlite", "--port", "0", "--blob-cache", "\(directory)/cache"])
        #expect(status != 0 && output.contains("--blob-cache is for PostgreSQL: with SQLite, blobs are files already"), "\(output)")
    }

    static func send(_ method: String, _ url: URL, body: Data? = nil, owner: Bool = false, range: String? = nil) async throws -> (status: Int, body: Data) {
        var request = URLRequest(url: url)
        request.httpMethod = method
        request.cachePolicy = .reloadIgnoringLocalCacheData
        if owner { request.setValue("Bearer \(secret)", forHTTPHeaderField: "Authorization") }
        if let range { request.setValue(range, forHTTPHeaderField: "Range") }
        if body != nil {
            request.setValue(method == "PUT" && url.path.hasPrefix("/api") ? "application/json" : "image/png", forHTTPHeaderField: "Content-Type")
        }
        let (data, response) =
            if let body { try await URLSession.shared.upload(for: request, from: body) } else { try await URLSession.shared.data(for: request) }
        return ((response as? HTTPURLResponse)?.statusCode ?? 0, data)
    }

    static func cacheHits(_ base: URL) async throws -> Int {
        let text = String(decoding: try await send("GET", base.appendingPathComponent("metrics")).body, as: UTF8.self)
        return text.split(separator: "\n").first { $0.hasPrefix("deltasnap_blob_cache_hits_total ") }.flatMap { Int($0.split(separator: " ")[1]) } ?? -1
    }
}

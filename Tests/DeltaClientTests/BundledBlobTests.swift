import DeltaAuthoring
import DeltaClient
import DeltaCore
import DeltaTestSupport
import Foundation
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

@Suite("bake --blobs: a snapshot that carries its files, installed offline")
struct BundledBlobTests {
    static let owner = "bundled-blob-secret"

    @Test(
        "Baked from the server and from its database to the same bytes; installed with no network, every blob there; a damaged blob refuses the snapshot",
        arguments: Backend.available)
    func bakeInstallOffline(backend: Backend) async throws {
        let directory = URL(fileURLWithPath: try makeTemporaryDirectory("deltasnap-bundled"))
        let database = try await backend.makeDatabase(in: directory)
        defer { Task { await database.remove() } }
        let (server, port) = try await startServer(db: database.location, environment: ["DELTASNAP_WRITE_TOKEN": Self.owner])
        defer { Task { await server.stop(SIGKILL) } }
        let base = URL(string: "http://127.0.0.1:\(port)")!
        let seed = SeededGenerator.seed(for: "BundledBlobTests.bakeInstallOffline(\(backend))")
        var random = SeededGenerator(seed: seed)
        let photo = random.bytes(150_000)
        let note = Array("a note".utf8)
        var references: [BlobReference] = []
        for (bytes, type) in [(photo, "image/jpeg"), (note, "text/plain"), ([UInt8](), "application/octet-stream")] {
            references.append(try await Self.upload(bytes, type: type, to: base))
        }
        func json(_ index: Int) -> String { String(decoding: references[index].json.canonicalBytes, as: UTF8.self) }
        try await Self.write(
            [#"{"id":"p1","photo":\#(json(0))}"#, #"{"files":[\#(json(1)),\#(json(2))],"id":"p2"}"#, #"{"id":"p3","photo":\#(json(0))}"#, #"{"id":"p4"}"#],
            to: base)

        let fromDB = directory.appendingPathComponent("db.snapshot").path
        let fromURL = directory.appendingPathComponent("url.snapshot").path
        var (status, printed) = try await runDeltasnap(["bake", "--db", database.location, "--collection", "photos", "--blobs", "--out", fromDB])
        #expect(status == 0 && printed.contains("blobs: 3, \(photo.count + note.count) bytes"), "\(printed)")
        (status, printed) = try await runDeltasnap(["bake", "--url", base.appendingPathComponent("api/photos").absoluteString, "--blobs", "--out", fromURL])
        #expect(status == 0, "\(printed)")
        #expect(
            FileManager.default.contents(atPath: fromDB) == FileManager.default.contents(atPath: fromURL), "the same state bakes to the same bytes both ways")
        (status, printed) = try await runDeltasnap(["verify", fromDB])
        #expect(printed == "\(fromDB): ok, 4 records in 1 collections, 3 blobs (\(photo.count + note.count) bytes)\n")
        (status, printed) = try await runDeltasnap(["inspect", "--json", fromDB])
        let inspected = try JSONValue(parsing: Array(printed.utf8))
        #expect(inspected["version"] == .string("2.0") && inspected["blobs"] == .number("3"), "\(printed)")
        await server.stop(SIGKILL)

        // No server: the snapshot is all there is.
        var configuration = ReplicaConfiguration(
            storeURL: directory.appendingPathComponent("app.sqlite"), snapshotURL: URL(fileURLWithPath: fromDB), serverURL: base.appendingPathComponent("api"))
        configuration.blobCacheBytes = 1
        let replica = try await Replica.open(configuration)
        for (reference, bytes) in zip(references, [photo, note, []]) {
            #expect(try Data(contentsOf: try await replica.blob(reference)) == Data(bytes), "\(reference.hash)")
        }
        // The cache budget does not evict what came with the app, nor does a sign-out remove it.
        try await replica.signOut()
        for reference in references {
            #expect(FileManager.default.fileExists(atPath: configuration.storeURL.path + "-blobs/\(reference.hash.hex)"))
        }

        // One changed byte in one blob, the trailer's SHA-256 recomputed: the whole snapshot is refused.
        let damaged = directory.appendingPathComponent("damaged.snapshot")
        try Self.changeOneBlobByte(URL(fileURLWithPath: fromDB), into: damaged)
        (status, printed) = try await runDeltasnap(["verify", damaged.path])
        #expect(status != 0 && printed.contains("does not match its hash"), "\(printed)")
        var other = configuration
        other.storeURL = directory.appendingPathComponent("other.sqlite")
        other.snapshotURL = damaged
        do {
            _ = try await Replica.open(other)
            Issue.record("a snapshot with a damaged blob was installed")
        } catch let error as ReplicaError {
            #expect(error.description.contains("does not match its hash"), "\(error)")
        }
        let leftovers = (try? FileManager.default.contentsOfDirectory(atPath: other.storeURL.path + "-blobs")) ?? []
        #expect(leftovers.allSatisfy { (try? BlobHash($0)) == nil }, "no blob kept from a refused snapshot: \(leftovers)")
    }

    static func upload(_ bytes: [UInt8], type: String, to base: URL) async throws -> BlobReference {
        var request = URLRequest(url: base.appendingPathComponent("blobs/\(BlobHash.of(bytes).hex)"))
        request.httpMethod = "PUT"
        request.setValue("Bearer \(owner)", forHTTPHeaderField: "Authorization")
        request.setValue(type, forHTTPHeaderField: "Content-Type")
        let (data, response) = try await URLSession.shared.upload(for: request, from: Data(bytes))
        #expect((response as? HTTPURLResponse)?.statusCode == 200, "\(String(decoding: data, as: UTF8.self))")
        return try BlobReference(try JSONValue(parsing: Array(data)))
    }

    static func write(_ records: [String], to base: URL) async throws {
        for record in records {
            let id = try Record(parsing: Array(record.utf8)).id
            var request = URLRequest(url: base.appendingPathComponent("api/photos/\(id)"))
            request.httpMethod = "PUT"
            request.setValue("Bearer \(owner)", forHTTPHeaderField: "Authorization")
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
            let (data, response) = try await URLSession.shared.upload(for: request, from: Data(record.utf8))
            let status = (response as? HTTPURLResponse)?.statusCode ?? 0
            #expect(status == 200 || status == 201, "\(String(decoding: data, as: UTF8.self))")
        }
    }

    /// Rewrites `file` with one base64 character of its first blob line changed and a trailer
    /// that matches the changed content: only the blob's own hash can catch it.
    static func changeOneBlobByte(_ file: URL, into out: URL) throws {
        var content: [UInt8] = []
        var decoder = ContentDecoder()
        try decoder.decode(try Data(contentsOf: file)) { content += $0 }
        try decoder.finish()
        var lines = String(decoding: content, as: UTF8.self).split(separator: "\n").map(String.init)
        let index = lines.firstIndex { $0.hasPrefix("\"") && $0.count > 100 }!
        var characters = Array(lines[index])
        characters[10] = characters[10] == "A" ? "B" : "A"
        lines[index] = String(characters)
        let trailer = try JSONValue(parsing: Array(lines.removeLast().utf8))
        var hasher = SHA256()
        let body = Array(lines.map { $0 + "\n" }.joined().utf8)
        hasher.update(body)
        let rewritten = JSONValue.object([
            JSONMember(key: "blobs", value: trailer["blobs"]!), JSONMember(key: "records", value: trailer["records"]!),
            JSONMember(key: "sha256", value: .string(hasher.hexDigest())),
        ])
        let compressor = try GzipCompressor()
        var compressed: [UInt8] = []
        compressor.compress(body + rewritten.canonicalBytes + [0x0A], into: &compressed)
        compressor.finish(into: &compressed)
        try Data(compressed).write(to: out)
    }
}

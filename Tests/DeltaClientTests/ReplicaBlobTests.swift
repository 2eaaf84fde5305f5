import DeltaClient
import DeltaCore
import DeltaSQLiteStore
import DeltaServer
import DeltaStore
import DeltaTestSupport
import Foundation
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

@Suite("Replica blobs: attached offline, uploaded before the writes that reference them, downloaded checked")
struct ReplicaBlobTests {
    static func record(_ id: String, _ member: String, _ reference: BlobReference) throws -> Record {
        try Record(parsing: Array(#"{"id":"\#(id)","\#(member)":"#.utf8) + reference.json.canonicalBytes + Array("}".utf8))
    }

    @Test("attach, put, sync: the server holds the blob before the record, once; another replica's blob() is the same bytes")
    func roundTrip() async throws {
        try await withHarness { harness in
            try await harness.put(#"{"id":"seed"}"#)
            let snapshot = try await harness.bake("base")
            let writer = try await Replica.open(harness.configuration("writer", snapshot: snapshot))
            var random = SeededGenerator(seed: 41)
            let photo = Data((0..<300_000).map { _ in UInt8(truncatingIfNeeded: random.next()) })
            let reference = try await writer.attach(photo, type: "image/jpeg")
            #expect(reference.hash == BlobHash.of(Array(photo)) && reference.size == 300_000 && reference.type == "image/jpeg")
            // A large file, attached a piece at a time.
            let file = harness.directory.appendingPathComponent("video.bin")
            let video = Data(random.bytes(3 << 20))
            try video.write(to: file)
            let second = try await writer.attach(contentsOf: file, type: "video/mp4")
            #expect(second.hash == BlobHash.of(Array(video)))
            // Offline, the replica serves its own copy.
            #expect(try Data(contentsOf: try await writer.blob(reference)) == photo)

            try await writer.put(try Self.record("p1", "photo", reference), in: items)
            try await writer.put(try Self.record("p2", "photo", reference), in: items)
            try await writer.put(try Self.record("v1", "video", second), in: items)
            _ = try await writer.sync()
            #expect(try await harness.store.blob(reference.hash)?.size == 300_000)
            #expect(try await harness.store.blob(second.hash)?.type == "video/mp4")
            #expect(try await harness.store.record("p2", in: CollectionName(items)) != nil)
            let metrics = String(
                decoding: try await URLSession.shared.data(from: URL(string: "http://127.0.0.1:\(harness.serverPort)/metrics")!).0, as: UTF8.self)
            #expect(metrics.contains("deltasnap_blob_uploads_total 2\n"), "each blob once: \(metrics.split(separator: "\n").filter { $0.contains("blob_up") })")
            // A later write referencing an uploaded blob uploads nothing again.
            try await writer.put(try Self.record("p3", "photo", reference), in: items)
            _ = try await writer.sync()
            let after = String(
                decoding: try await URLSession.shared.data(from: URL(string: "http://127.0.0.1:\(harness.serverPort)/metrics")!).0, as: UTF8.self)
            #expect(after.contains("deltasnap_blob_uploads_total 2\n"))

            let reader = try await Replica.open(harness.configuration("reader", snapshot: snapshot))
            _ = try await reader.sync()
            let got = try await reader.blob(reference)
            #expect(try Data(contentsOf: got) == photo)
            #expect(got.path.hasSuffix("-blobs/\(reference.hash.hex)"))
            #expect(try Data(contentsOf: try await reader.blob(second)) == video)
        }
    }

    @Test("A blob refused for good (413, over --max-blob-size) holds no write back: the others go, those referencing it are turned down, it is not sent again")
    func refusedUpload() async throws {
        try await withHarness(configure: { $0.maximumBlobBytes = 100_000 }) { harness in
            try await harness.put(#"{"id":"seed"}"#)
            let snapshot = try await harness.bake("base")
            let replica = try await Replica.open(harness.configuration("writer", snapshot: snapshot))
            let bytes = Data(repeating: 7, count: 300_000)
            let big = try await replica.attach(bytes, type: "application/octet-stream")
            try await replica.put(try Self.record("big", "file", big), in: items)
            try await replica.put(try DeltaClientTests.record(#"{"id":"plain","n":1}"#), in: items)

            let report = try await replica.sync()
            let refusal = try #require(report.pushError, "the sync says why the write was turned down")
            #expect(refusal.kind == .refused && refusal.evidence?.contains("\(big.hash.hex): HTTP 413") == true, "\(refusal)")
            #expect(replica.syncState.lastError == refusal)
            #expect(report.pushed.applied == 1 && report.pushed.conflicts.map(\.id) == ["big"])
            let server = try await harness.serverRecords()
            #expect(server["plain"] == #"{"id":"plain","n":1}"# && server["big"] == nil, "\(server)")
            await #expect(try replica.state(of: "plain", in: items) == .synced)
            let conflicts = try await replica.conflicts()
            #expect(conflicts.map(\.id) == ["big"] && conflicts.first?.reason.hasPrefix("invalid: blob-missing") == true, "\(conflicts.map(\.reason))")
            #expect(try await Self.refusedUploads(harness) == 1)

            // Another write referencing it: turned down without the blob being sent again.
            try await replica.put(try Self.record("again", "file", big), in: items)
            let second = try await replica.sync()
            #expect(second.pushError?.evidence?.contains("\(big.hash.hex): HTTP 413") == true, "\(String(describing: second.pushError))")
            #expect(second.pushed.conflicts.map(\.id) == ["again"])
            #expect(try await Self.refusedUploads(harness) == 1, "the refused blob was sent again")

            // The app attaches the same bytes again: the next push tries the server once more.
            #expect(try await replica.attach(bytes, type: "application/octet-stream") == big)
            try await replica.put(try Self.record("third", "file", big), in: items)
            _ = try await replica.sync()
            #expect(try await Self.refusedUploads(harness) == 2)
            #expect(try await replica.conflicts().map(\.id).sorted() == ["again", "big", "third"])
        }
    }

    @Test("A blob refused with the credential (401) is no refusal of the blob: the writes stay queued, and the next sync sends it")
    func credentialRefusal() async throws {
        try await withHarness { harness in
            try await harness.put(#"{"id":"seed"}"#)
            let snapshot = try await harness.bake("base")
            var configuration = harness.configuration("writer", snapshot: snapshot)
            configuration.clientKey = "not-the-key"
            let replica = try await Replica.open(configuration)
            let photo = try await replica.attach(Data("photo".utf8), type: "image/jpeg")
            try await replica.put(try Self.record("p", "photo", photo), in: items)
            let report = try await replica.sync()
            #expect(report.pushError?.evidence?.hasPrefix("HTTP 401") == true, "\(String(describing: report.pushError))")
            await #expect(try replica.state(of: "p", in: items) == .pending)
            #expect(try await replica.conflicts().isEmpty)
            configuration.clientKey = appKey
            let fixed = try await Replica.open(configuration)
            #expect(try await fixed.sync().pushed.applied == 1)
            #expect(try await harness.store.blob(photo.hash) != nil)
        }
    }

    /// The server's count of `PUT /blobs/{sha256}` answered `413`.
    static func refusedUploads(_ harness: Harness) async throws -> Int {
        let url = URL(string: "http://127.0.0.1:\(harness.serverPort)/metrics")!
        let metrics = String(decoding: try await URLSession.shared.data(from: url).0, as: UTF8.self)
        let line = metrics.split(separator: "\n").first { $0.hasPrefix("deltasnap_http_requests_total{") && $0.contains("PUT") && $0.contains("\"413\"") }
        return line.flatMap { $0.split(separator: " ").last }.flatMap { Int($0) } ?? 0
    }

    @Test("A blob the server does not give is refused; one that does not match its reference is not kept")
    func refusals() async throws {
        try await withHarness { harness in
            try await harness.put(#"{"id":"seed"}"#)
            let snapshot = try await harness.bake("base")
            let replica = try await Replica.open(harness.configuration("reader", snapshot: snapshot))
            let nowhere = BlobReference(hash: BlobHash.of(Array("nowhere".utf8)), size: 7, type: "text/plain")
            await #expect(throws: ReplicaError.self) { _ = try await replica.blob(nowhere) }
            // The server holds these bytes, but the reference says another size.
            let bytes = Array("held bytes".utf8)
            let upload = try await harness.store.beginUpload(BlobHash.of(bytes), type: "text/plain", maximumBytes: 100, uploader: nil)
            try await upload.write(bytes)
            _ = try await upload.finish()
            try await harness.put(#"{"id":"f","file":{"$blob":"\#(BlobHash.of(bytes).hex)","size":10,"type":"text/plain"}}"#)
            let lying = BlobReference(hash: BlobHash.of(bytes), size: 11, type: "text/plain")
            do {
                _ = try await replica.blob(lying)
                Issue.record("a blob of the wrong size was kept")
            } catch let error as ReplicaError {
                #expect(error.kind == .unusableAnswer, "\(error)")
            }
            let right = try await replica.blob(BlobReference(hash: BlobHash.of(bytes), size: 10, type: "text/plain"))
            #expect(try Data(contentsOf: right) == Data(bytes))
            await #expect(throws: ReplicaError.self) { _ = try await replica.attach(Data([1]), type: "not a type") }
        }
    }

    @Test("Sign-out removes the user's blobs (attached, partial) and keeps those a public row still held references")
    func signOut() async throws {
        try await withHarness { harness in
            try await harness.put(#"{"id":"seed"}"#)
            let snapshot = try await harness.bake("base")
            let writer = try await Replica.open(harness.configuration("writer", snapshot: snapshot))
            let shared = try await writer.attach(Data("everyone's".utf8), type: "text/plain")
            try await writer.put(try Self.record("pub", "photo", shared), in: items)
            _ = try await writer.sync()
            let configuration = harness.configuration("user", snapshot: snapshot)
            let replica = try await Replica.open(configuration)
            _ = try await replica.sync()
            _ = try await replica.blob(shared)
            let attached = try await replica.attach(Data("mine".utf8), type: "text/plain")
            let directory = configuration.storeURL.path + "-blobs"
            #expect(FileManager.default.fileExists(atPath: "\(directory)/\(attached.hash.hex)"))
            try FileManager.default.createDirectory(atPath: "\(directory)/partial", withIntermediateDirectories: true)
            _ = FileManager.default.createFile(atPath: "\(directory)/partial/cut", contents: Data("half".utf8))
            try await replica.signOut(discardingPendingWrites: true)
            #expect(!FileManager.default.fileExists(atPath: "\(directory)/\(attached.hash.hex)"))
            #expect(!FileManager.default.fileExists(atPath: "\(directory)/partial"))
            await #expect(throws: ReplicaError.self) { _ = try await replica.blob(attached) }
            #expect(FileManager.default.fileExists(atPath: "\(directory)/\(shared.hash.hex)"), "a public row still references it")
        }
    }

    @Test("Opening a replica removes what kills left in partial/ once it is old: an hour for a copy, a week for a resumable download")
    func stalePartials() async throws {
        try await withHarness { harness in
            try await harness.put(#"{"id":"seed"}"#)
            let snapshot = try await harness.bake("base")
            let configuration = harness.configuration("user", snapshot: snapshot)
            let partial = configuration.storeURL.path + "-blobs/partial"
            try FileManager.default.createDirectory(atPath: partial, withIntermediateDirectories: true)
            let ages: [(String, TimeInterval)] = [
                ("old-copy", 2 * 3_600), ("new-copy", 60), ("\(String(repeating: "a", count: 64)).download", 2 * 86_400),
                ("\(String(repeating: "b", count: 64)).download", 8 * 86_400),
            ]
            for (name, age) in ages {
                _ = FileManager.default.createFile(atPath: "\(partial)/\(name)", contents: Data("x".utf8))
                try FileManager.default.setAttributes([.modificationDate: Date().addingTimeInterval(-age)], ofItemAtPath: "\(partial)/\(name)")
            }
            _ = try await Replica.open(configuration)
            let left = try FileManager.default.contentsOfDirectory(atPath: partial).sorted()
            #expect(left == ["\(String(repeating: "a", count: 64)).download", "new-copy"])
        }
    }

    @Test("An .eager collection's blobs arrive with the sync that brings them; a cache budget lets the least recently used go, never one not uploaded")
    func eagerAndBudget() async throws {
        try await withHarness { harness in
            try await harness.put(#"{"id":"seed"}"#)
            let snapshot = try await harness.bake("base")
            let writer = try await Replica.open(harness.configuration("writer", snapshot: snapshot))
            var references: [BlobReference] = []
            for index in 0..<3 {
                let reference = try await writer.attach(Data(repeating: UInt8(index), count: 300_000), type: "application/octet-stream")
                try await writer.put(try Self.record("b\(index)", "file", reference), in: items)
                references.append(reference)
            }
            _ = try await writer.sync()

            var eager = harness.configuration("eager", snapshot: snapshot)
            eager.blobDownloads = [items: .eager]
            let eagerReplica = try await Replica.open(eager)
            _ = try await eagerReplica.sync()
            let eagerDirectory = eager.storeURL.path + "-blobs"
            for reference in references { #expect(FileManager.default.fileExists(atPath: "\(eagerDirectory)/\(reference.hash.hex)")) }
            let lazy = harness.configuration("lazy", snapshot: snapshot)
            _ = try await (try await Replica.open(lazy)).sync()
            #expect(!FileManager.default.fileExists(atPath: "\(lazy.storeURL.path)-blobs/\(references[0].hash.hex)"))

            var small = harness.configuration("small", snapshot: snapshot)
            small.blobCacheBytes = 400_000
            let cached = try await Replica.open(small)
            _ = try await cached.sync()
            let mine = try await cached.attach(Data("not uploaded yet".utf8), type: "text/plain")
            let directory = small.storeURL.path + "-blobs"
            for reference in references {
                let file = try await cached.blob(reference)
                #expect(try Data(contentsOf: file).count == 300_000)
            }
            // The last one asked for stays; the two before it went; the unsent one stays.
            #expect(!FileManager.default.fileExists(atPath: "\(directory)/\(references[0].hash.hex)"))
            #expect(!FileManager.default.fileExists(atPath: "\(directory)/\(references[1].hash.hex)"))
            #expect(FileManager.default.fileExists(atPath: "\(directory)/\(references[2].hash.hex)"))
            #expect(FileManager.default.fileExists(atPath: "\(directory)/\(mine.hash.hex)"))
            // An evicted one comes back when asked for.
            #expect(try Data(contentsOf: try await cached.blob(references[0])) == Data(repeating: 0, count: 300_000))
        }
    }
}

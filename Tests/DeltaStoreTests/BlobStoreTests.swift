import DeltaCore
import DeltaSQLiteStore
import DeltaStore
import DeltaTestSupport
import Foundation
import Testing

@Suite("BlobStore, on every backend")
struct BlobStoreTests {
    @Test("An upload becomes a blob whose bytes read back whole and in clamped ranges; so does one of no bytes", arguments: Backend.available)
    func roundTrip(backend: Backend) async throws {
        try await backend.withStore { store, _ in
            let bytes = Array("The quick brown fox jumps over the lazy dog, and then some more bytes.".utf8)
            let hash = BlobHash.of(bytes)
            let stored = try await upload(store, bytes, type: "text/plain", in: [10, 0, 50, 1_000])
            #expect(stored == StoredBlob(hash: hash, size: Int64(bytes.count), type: "text/plain"))
            #expect(try await store.blob(hash) == stored)
            let size = Int64(bytes.count)
            #expect(try await read(store, hash, 0..<size) == bytes)
            #expect(try await read(store, hash, 0..<size, chunk: 7) == bytes)
            #expect(try await read(store, hash, 0..<1) == [bytes[0]])
            #expect(try await read(store, hash, 10..<20) == Array(bytes[10..<20]))
            #expect(try await read(store, hash, (size - 1)..<size) == [bytes[bytes.count - 1]])
            #expect(try await read(store, hash, (size - 5)..<(size + 100)) == Array(bytes.suffix(5)))
            #expect(try await read(store, hash, (size + 10)..<(size + 20)) == [])
            #expect(try await read(store, hash, 0..<Int64.max) == bytes)
            // A blob of no bytes.
            let empty = try await upload(store, [], type: "application/octet-stream")
            #expect(empty == StoredBlob(hash: BlobHash.of([UInt8]()), size: 0, type: "application/octet-stream"))
            #expect(try await store.blob(empty.hash) == empty)
            #expect(try await read(store, empty.hash, 0..<10) == [])
            let totals = try await store.blobTotals()
            #expect(totals.blobs == 2 && totals.bytes == size)
        }
    }

    @Test("Five MiB of random bytes, uploaded in uneven pieces, read back equal in chunks and across parts", arguments: Backend.available)
    func large(backend: Backend) async throws {
        let seed = SeededGenerator.seed(for: "BlobStoreTests.large(\(backend))")
        var random = SeededGenerator(seed: seed)
        var bytes = [UInt8](repeating: 0, count: 5 << 20)
        bytes.withUnsafeMutableBytes { raw in
            for index in stride(from: 0, to: raw.count, by: 8) { raw.storeBytes(of: random.next(), toByteOffset: index, as: UInt64.self) }
        }
        try await backend.withStore { store, _ in
            let hash = BlobHash.of(bytes)
            let stored = try await upload(store, bytes, type: "image/jpeg", in: [300_001, 1 << 20, 7, 2_500_000])
            #expect(stored.size == Int64(bytes.count), "seed \(seed)")
            #expect(try await read(store, hash, 0..<stored.size, chunk: 777_777) == bytes, "seed \(seed)")
            let boundary = Int64(1 << 20)
            #expect(try await read(store, hash, (boundary - 10)..<(boundary + 10)) == Array(bytes[(1 << 20) - 10..<(1 << 20) + 10]))
            #expect(try await read(store, hash, (3 * boundary + 5)..<(5 * boundary)) == Array(bytes[(3 << 20) + 5..<(5 << 20)]))
        }
    }

    @Test("Bytes that do not hash to the name are refused and leave nothing", arguments: Backend.available)
    func mismatch(backend: Backend) async throws {
        try await backend.withStore { store, _ in
            let hash = BlobHash.of(Array("expected".utf8))
            let pending = try await store.beginUpload(hash, type: "text/plain", maximumBytes: 100, uploader: nil)
            try await pending.write(Array("something else".utf8))
            let error = await #expect(throws: StoreError.self) { try await pending.finish() }
            #expect(error?.kind == .blobHash)
            #expect(error?.evidence?.hasPrefix(BlobHash.of(Array("something else".utf8)).hex) == true)
            await pending.cancel()
            #expect(try await store.blob(hash) == nil)
            #expect(try await store.openBlob(hash, range: 0..<10) == nil)
            #expect(try await store.blobTotals().blobs == 0)
        }
    }

    @Test("An upload past its limit or cancelled ends and leaves nothing; cancelling twice or after finishing is harmless", arguments: Backend.available)
    func ended(backend: Backend) async throws {
        try await backend.withStore { store, _ in
            let bytes = [UInt8](repeating: 7, count: (2 << 20) + 3)
            let hash = BlobHash.of(bytes)
            let tooLarge = try await store.beginUpload(hash, type: "application/octet-stream", maximumBytes: 1 << 20, uploader: nil)
            try await tooLarge.write(Array(bytes.prefix(1 << 20)))
            #expect(await #expect(throws: StoreError.self) { try await tooLarge.write([7]) }?.kind == .tooLarge)
            await #expect(throws: StoreError.self) { try await tooLarge.finish() }
            await tooLarge.cancel()
            let cancelled = try await store.beginUpload(hash, type: "application/octet-stream", maximumBytes: 1 << 30, uploader: nil)
            try await cancelled.write(bytes)
            await cancelled.cancel()
            await cancelled.cancel()
            await #expect(throws: StoreError.self) { try await cancelled.write([1]) }
            #expect(try await store.blob(hash) == nil)
            #expect(try await store.openBlob(hash, range: 0..<1) == nil)
            let totals = try await store.blobTotals()
            #expect(totals.blobs == 0 && totals.bytes == 0)
            let atLimit = try await store.beginUpload(hash, type: "application/octet-stream", maximumBytes: Int64(bytes.count), uploader: nil)
            try await atLimit.write(bytes)
            #expect(try await atLimit.finish().size == Int64(bytes.count))  // exactly at the limit is allowed
            await atLimit.cancel()
            #expect(try await read(store, hash, 0..<Int64(bytes.count)) == bytes)
        }
    }

    @Test("Nothing an upload staged is left once it ends, whichever way; staging abandoned long ago goes too", arguments: Backend.available)
    func staging(backend: Backend) async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("deltastore-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let database = try await backend.makeDatabase(in: directory)
        let store = try await database.open()
        do {
            try await checkStaging(backend: backend, database: database, store: store)
            try await store.close()
            await database.remove()
        } catch {
            try? await store.close()
            await database.remove()
            throw error
        }
    }

    private func checkStaging(backend: Backend, database: TestDatabase, store: any ChangeStore) async throws {
        if backend == .postgres {  // staging abandoned in 1970
            try await database.execute("INSERT INTO blob_parts(hash, part, bytes) VALUES ('upload/000000000001/abandoned', 0, '\\x00')")
        }
        let bytes = [UInt8](repeating: 1, count: (1 << 20) + 1)
        // Cancelled just after a whole part: on PostgreSQL its `INSERT` may still be running. Ten
        // times, so that a cancel not waiting for it would leave a part behind in some of them.
        for _ in 0..<10 {
            let cancelled = try await store.beginUpload(BlobHash.of(bytes), type: "text/plain", maximumBytes: 1 << 30, uploader: nil)
            try await cancelled.write(bytes)
            await cancelled.cancel()
        }
        let wrong = try await store.beginUpload(BlobHash.of([1]), type: "text/plain", maximumBytes: 1 << 30, uploader: nil)
        try await wrong.write(bytes)
        await #expect(throws: StoreError.self) { try await wrong.finish() }
        let tooLarge = try await store.beginUpload(BlobHash.of(bytes), type: "text/plain", maximumBytes: 1 << 20, uploader: nil)
        try await tooLarge.write(Array(bytes.prefix(1 << 20)))
        await #expect(throws: StoreError.self) { try await tooLarge.write([1]) }
        async let one = upload(store, bytes, type: "text/plain", in: [1 << 19])
        async let two = upload(store, bytes, type: "text/plain", in: [1 << 18])
        _ = try await (one, two)
        switch backend {
        case .sqlite:
            let partial = (store as? SQLiteStore).map { $0.blobDirectory + "/partial" } ?? ""
            #expect(try FileManager.default.contentsOfDirectory(atPath: partial).isEmpty)
        case .postgres:
            // Fails the statement when any staged part is left: those of these uploads, or the one abandoned in 1970.
            try await database.execute(
                """
                DO $$ BEGIN
                    IF EXISTS (SELECT 1 FROM blob_parts WHERE hash LIKE 'upload/%') THEN RAISE EXCEPTION 'staged parts left'; END IF;
                    IF (SELECT count(*) FROM blob_parts) <> 2 THEN RAISE EXCEPTION 'not the blob''s 2 parts'; END IF;
                END $$
                """)
        }
    }

    @Test("Uploading a stored blob again returns it as first stored; two at once both succeed", arguments: Backend.available)
    func idempotent(backend: Backend) async throws {
        try await backend.withStore { store, _ in
            let bytes = Array("same bytes".utf8)
            let first = try await upload(store, bytes, type: "text/plain", in: [4])
            let second = try await upload(store, bytes, type: "application/json", in: [])
            #expect(second == first && second.type == "text/plain")
            let large = (0..<((2 << 20) + 12_345)).map { UInt8(truncatingIfNeeded: $0 &* 31) }
            async let one = upload(store, large, type: "image/png", in: [100_000])
            async let two = upload(store, large, type: "image/png", in: [65_536])
            let (a, b) = try await (one, two)
            #expect(a == b && a.size == Int64(large.count))
            #expect(try await read(store, a.hash, 0..<a.size, chunk: 1 << 20) == large)
            let totals = try await store.blobTotals()
            #expect(totals.blobs == 2 && totals.bytes == Int64(bytes.count + large.count))
        }
    }

    @Test("Referrers are the visible rows whose current version references the blob", arguments: Backend.available)
    func referrers(backend: Backend) async throws {
        try await backend.withStore { store, _ in
            let blob = try await upload(store, Array("a photo".utf8), type: "image/jpeg", in: [])
            let hex = blob.hash.hex
            let note = #"{"id":"a","photo":{"$blob":"\#(hex)","size":7,"type":"image/jpeg"}}"#
            let album = #"{"id":"z","pictures":[{"$blob":"\#(hex)","size":7,"type":"image/jpeg"}]}"#
            func listed(_ collections: [String]? = nil, limit: Int = 10) async throws -> [String] {
                try await store.referrers(of: blob.hash, in: collections.map { $0.map(name) }, limit: limit).map { "\($0.collection)/\($0.record.id)" }
            }
            try await put(store, "notes", note, #"{"id":"b","text":"no blob"}"#)
            try await put(store, "albums", album)
            #expect(try await listed() == ["albums/z", "notes/a"])
            #expect(try await listed(limit: 1) == ["albums/z"])
            #expect(try await listed(["notes"]) == ["notes/a"])
            #expect(try await listed(["other"]) == [])
            let found = try await store.referrers(of: blob.hash, in: [name("notes")], limit: 10)
            #expect(found == [BlobReferrer(collection: name("notes"), record: try record(note))])
            // Writing the same version again changes nothing and keeps the reference.
            #expect(try await put(store, "notes", note).unchanged == 1)
            #expect(try await listed(["notes"]) == ["notes/a"])
            // Hidden rows keep their references but are not listed; brought back, they are again.
            _ = try await store.write(to: name("notes")) { try await $0.hide(id: "a") }
            #expect(try await listed() == ["albums/z"])
            try await put(store, "notes", note)
            #expect(try await listed() == ["albums/z", "notes/a"])
            // A tombstone written with the body keeps it too.
            try await put(store, "notes", #"{"id":"a","hidden":true,"photo":{"$blob":"\#(hex)","size":7,"type":"image/jpeg"}}"#)
            #expect(try await listed() == ["albums/z"])
            try await put(store, "notes", note)
            #expect(try await listed() == ["albums/z", "notes/a"])
            // A new version without the reference drops it.
            try await put(store, "notes", #"{"id":"a","photo":null}"#)
            try await put(store, "albums", #"{"id":"z","pictures":[]}"#)
            #expect(try await listed() == [])
            // A reference to a blob not stored is kept all the same (the write decides whether to allow it).
            let other = BlobHash.of(Array("elsewhere".utf8))
            try await put(store, "notes", #"{"id":"c","f":{"$blob":"\#(other.hex)","size":9,"type":"text/plain"}}"#)
            #expect(try await store.referrers(of: other, in: nil, limit: 10).map(\.record.id) == ["c"])
        }
    }

    @Test("A write transaction sees which blobs are held, and only those", arguments: Backend.available)
    func held(backend: Backend) async throws {
        try await backend.withStore { store, _ in
            let stored = try await upload(store, Array("held".utf8), type: "text/plain", in: [])
            let missing = BlobHash.of(Array("not held".utf8))
            let (held, none) = try await store.write(to: name("notes")) { transaction in
                (try await transaction.heldBlobs([stored.hash, missing], uploadedBy: nil), try await transaction.heldBlobs([], uploadedBy: nil))
            }.value
            #expect(held == [stored.hash])
            #expect(none.isEmpty)
        }
    }
}

/// Uploads `bytes` under their hash, written in pieces of the given sizes (then the rest).
private func upload(_ store: any ChangeStore, _ bytes: [UInt8], type: String, in pieces: [Int] = []) async throws -> StoredBlob {
    let pending = try await store.beginUpload(BlobHash.of(bytes), type: type, maximumBytes: 1 << 30, uploader: nil)
    var offset = 0
    for piece in pieces where offset < bytes.count {
        let end = min(offset + piece, bytes.count)
        try await pending.write(Array(bytes[offset..<end]))
        offset = end
    }
    if offset < bytes.count { try await pending.write(Array(bytes[offset...])) }
    return try await pending.finish()
}

/// The bytes of `range` of the blob, read `chunk` at a time; fails when it is not stored.
private func read(_ store: any ChangeStore, _ hash: BlobHash, _ range: Range<Int64>, chunk: Int = 1 << 16) async throws -> [UInt8] {
    guard let reading = try await store.openBlob(hash, range: range) else { throw TestFailure("blob \(hash) is not stored") }
    defer { reading.close() }
    var bytes: [UInt8] = []
    while let next = try await reading.next(maximumBytes: chunk) {
        #expect(!next.isEmpty && next.count <= chunk)
        bytes += next
    }
    #expect(try await reading.next(maximumBytes: chunk) == nil)
    return bytes
}

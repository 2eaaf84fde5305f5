import DeltaCore
import DeltaStore
import Foundation
import NIOConcurrencyHelpers
import PostgresNIO

/// An upload to PostgreSQL: hashed as it comes, written in parts of `partSize` under a staging
/// key of its own, and made the blob by `finish` when the bytes match the name
/// (`PostgresStore.publishBlob`). One part's `INSERT` runs while the next part fills, so the
/// database stores while the server receives and hashes; at most two parts are held in memory.
/// Nothing reads staging keys: an upload that never ends is invisible, and its parts are deleted
/// by a later upload's `finish` after a day. Used by one task at a time, as `BlobUpload` requires.
final class PostgresBlobUpload: BlobUpload, @unchecked Sendable {
    /// The bytes of every part but a blob's last.
    static let partSize = 1 << 20

    let store: PostgresStore
    let hash: BlobHash
    private let type: String
    private let maximumBytes: Int64
    /// The user uploading, recorded with the blob (`BlobStore.beginUpload`).
    private let uploader: String?
    /// Who `suspend` keeps the parts for (`PostgresBlobUpload+Resume`), nil: nobody.
    let holder: String?
    /// The key its parts are written under until `finish`: `upload/<start, Unix seconds>/<random>`.
    let staging: String
    let digest = BackgroundHasher()
    var buffer: [UInt8] = []
    var written: Int64 = 0
    var parts = 0
    /// The `INSERT` of the last part flushed, still running or not yet awaited.
    var pending: Task<Void, any Error>?
    /// Whether parts may be in the database under `staging`.
    var staged = false
    var ended = false

    init(store: PostgresStore, hash: BlobHash, type: String, maximumBytes: Int64, uploader: String?, holder: String? = nil) {
        self.store = store
        self.uploader = uploader
        self.holder = holder
        self.hash = hash
        self.type = type
        self.maximumBytes = maximumBytes
        staging = Self.stagingKey(startedAt: Date(), id: UUID().uuidString.lowercased())
    }

    /// A staging key: after every blob's hash in byte order (`u` follows the hex digits), and in
    /// the order uploads started, so that old ones are one range of the primary key.
    static func stagingKey(startedAt date: Date, id: String) -> String {
        let seconds = String(max(Int64(date.timeIntervalSince1970), 0))
        return "upload/" + String(repeating: "0", count: max(12 - seconds.count, 0)) + seconds + "/" + id
    }

    /// Hashes the bytes and writes every full part; past `maximumBytes`, ends the upload.
    func write(_ bytes: [UInt8]) async throws {
        guard !ended else { throw StoreError(.invalidWrite, "blob \(hash)", "the upload was already ended") }
        guard written + Int64(bytes.count) <= maximumBytes else {
            await cancel()
            throw StoreError(.tooLarge, "blob \(hash)", "larger than the limit", evidence: "more than \(maximumBytes) bytes")
        }
        await digest.update(bytes)
        written += Int64(bytes.count)
        var rest = bytes[...]
        while !rest.isEmpty {
            let take = min(Self.partSize - buffer.count, rest.count)
            buffer.append(contentsOf: rest.prefix(take))
            rest = rest.dropFirst(take)
            if buffer.count == Self.partSize { try await flush() }
        }
    }

    /// Writes the last part, checks the hash and publishes the blob; any failure ends the upload.
    func finish() async throws -> StoredBlob {
        guard !ended else { throw StoreError(.invalidWrite, "blob \(hash)", "the upload was already ended") }
        try await flush()
        try await settle()
        let actual = BlobHash(digest: await digest.finalize())
        guard actual == hash else {
            await cancel()
            throw StoreError(.blobHash, "blob \(hash)", "the bytes uploaded hash to another SHA-256", evidence: "\(actual.hex), \(written) bytes")
        }
        do {
            let stored = try await store.publishBlob(hash, type: type, size: written, staging: staging, parts: parts, uploader: uploader)
            ended = true
            staged = false
            return stored
        } catch {
            await cancel()
            throw error
        }
    }

    /// Ends the upload and deletes its staged parts.
    func cancel() async {
        ended = true
        buffer = []
        // The delete must come after the part being written, or that part would stay.
        _ = await pending?.result
        pending = nil
        guard staged else { return }
        var binds = PostgresBindings(capacity: 1)
        binds.append(staging)
        // When this fails, a later upload's `finish` deletes the parts after a day.
        if (try? await store.runBlobStatement("DELETE FROM deltasnap.blob_parts WHERE hash = $1", binds)) != nil { staged = false }
    }

    /// Starts writing the buffered bytes as the next part, once the part before is written;
    /// a failure of either ends the upload.
    private func flush() async throws {
        guard !buffer.isEmpty else { return }
        try await settle()
        let statement = PostgresBlobPartInsert(key: staging, part: Int32(parts), bytes: ByteBuffer(bytes: buffer))
        staged = true
        pending = Task { [store] in try await store.insertBlobPart(statement) }
        parts += 1
        buffer.removeAll(keepingCapacity: true)
    }

    /// Waits for the part being written; a failure ends the upload.
    func settle() async throws {
        guard let running = pending else { return }
        pending = nil
        do {
            try await running.value
        } catch {
            await cancel()
            throw error
        }
    }
}

/// A range of a blob stored in parts, read one part's slice per statement (at most `partSize`
/// bytes held), each on a pooled connection taken for that statement only: a slow reader holds
/// no connection. Used by one task at a time, as `BlobReading` requires.
final class PostgresBlobReading: BlobReading, @unchecked Sendable {
    let blob: StoredBlob
    private let store: PostgresStore
    private var offset: Int64
    private let end: Int64
    /// Bytes read from the database and not yet returned, from `index`.
    private var buffer: [UInt8] = []
    private var index = 0
    private let closed = NIOLockedValueBox(false)

    init(blob: StoredBlob, store: PostgresStore, range: Range<Int64>) {
        self.blob = blob
        self.store = store
        offset = range.lowerBound
        end = range.upperBound
    }

    /// The next bytes of the range, from the part slice held or a new one; nil after the end or once closed.
    func next(maximumBytes: Int) async throws -> [UInt8]? {
        guard !closed.withLockedValue({ $0 }) else { return nil }
        if index == buffer.count {
            guard offset < end else { return nil }
            let size = Int64(PostgresBlobUpload.partSize)
            let within = offset % size
            let wanted = min(end - offset, size - within)
            let bytes = try await store.blobBytes(blob.hash, part: Int32(offset / size), offset: Int32(within), count: Int32(wanted))
            guard bytes.count == wanted else {
                throw StoreError(
                    .corrupt, "blob \(blob.hash)", "its stored parts end before its size (removed while it was read?)",
                    evidence: "at byte \(offset + Int64(bytes.count)) of \(blob.size)")
            }
            (buffer, index) = (bytes, 0)
            offset += wanted
        }
        let take = min(max(maximumBytes, 1), buffer.count - index)
        if index == 0 && take == buffer.count {
            let whole = buffer
            (buffer, index) = ([], 0)
            return whole
        }
        index += take
        return Array(buffer[index - take..<index])
    }

    /// Ends the reading (it holds no connection between calls).
    func close() {
        closed.withLockedValue { $0 = true }
        buffer = []
        index = 0
    }
}

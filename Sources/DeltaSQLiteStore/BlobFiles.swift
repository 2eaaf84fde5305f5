import DeltaCore
import DeltaStore
import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// An upload into a blob directory: written to `partial/` while hashed, renamed into place when
/// whole and synced, then recorded by `record` (the database row). With a `holder`, `suspend`
/// keeps the file for them (`FileBlobUpload+Resume`). Used by one task at a time.
final class FileBlobUpload: BlobUpload, @unchecked Sendable {
    let hash: BlobHash
    private let maximumBytes: Int64
    let directory: String
    let holder: String?
    private let record: @Sendable (Int64) async throws -> StoredBlob
    let partial: String
    var descriptor: Int32
    let digest = BackgroundHasher()
    var written: Int64 = 0
    var failed = false

    /// A new upload, or with `claimed` the continuation of a kept one: that file, whose bytes
    /// the caller hashes again (`resume`).
    init(
        hash: BlobHash, type: String, maximumBytes: Int64, directory: String, holder: String? = nil, claimed: String? = nil,
        record: @escaping @Sendable (Int64) async throws -> StoredBlob
    ) throws {
        self.hash = hash
        self.maximumBytes = maximumBytes
        self.directory = directory
        self.holder = holder
        self.record = record
        try FileBlobUpload.makeDirectory(directory + "/partial")
        partial = claimed ?? directory + "/partial/" + UUID().uuidString.lowercased()
        descriptor = open(partial, claimed == nil ? O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC : O_WRONLY | O_APPEND | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else { throw FileBlobUpload.failure("cannot create \(partial)") }
    }

    deinit { if descriptor >= 0 { close(descriptor) } }

    /// Where the bytes of `hash` are kept in `directory`.
    static func path(of hash: BlobHash, in directory: String) -> String {
        directory + "/" + hash.hex.prefix(2) + "/" + hash.hex
    }

    func write(_ bytes: [UInt8]) async throws {
        guard !failed, descriptor >= 0 else { throw StoreError(.invalidWrite, "blob \(hash)", "the upload was already ended") }
        guard written + Int64(bytes.count) <= maximumBytes else {
            failed = true
            await cancel()
            throw StoreError(.tooLarge, "blob \(hash)", "larger than the limit", evidence: "more than \(maximumBytes) bytes")
        }
        await digest.update(bytes)
        let (descriptor, partial, before) = (self.descriptor, self.partial, written)
        written += Int64(bytes.count)
        let after = written
        try await BlockingIO.run {
            try bytes.withUnsafeBytes { raw in
                var offset = 0
                while offset < raw.count {
                    let count = Glibc.write(descriptor, raw.baseAddress! + offset, raw.count - offset)
                    if count < 0 && errno == EINTR { continue }
                    guard count > 0 else { throw FileBlobUpload.failure("cannot write \(partial)") }
                    offset += count
                }
            }
            #if os(Linux)
                // Start writing back each 8 MiB as it fills, so that the fsync at the end has
                // little left to wait for (100 MiB: the upload's fsync went from most of the disk's
                // time to a fraction of it).
                let step: Int64 = 8 << 20
                if after / step > before / step {
                    _ = posix_fadvise(descriptor, off_t((after / step - 1) * step), off_t(step), POSIX_FADV_DONTNEED)
                }
            #endif
        }
    }

    func finish() async throws -> StoredBlob {
        guard !failed, descriptor >= 0 else { throw StoreError(.invalidWrite, "blob \(hash)", "the upload was already ended") }
        let actual = BlobHash(digest: await digest.finalize())
        guard actual == hash else {
            await cancel()
            throw StoreError(.blobHash, "blob \(hash)", "the bytes uploaded hash to another SHA-256", evidence: "\(actual.hex), \(written) bytes")
        }
        let (file, partial) = (descriptor, self.partial)
        descriptor = -1
        let final = FileBlobUpload.path(of: hash, in: directory)
        try await BlockingIO.run {
            defer { close(file) }
            guard fsync(file) == 0 else {
                let failure = FileBlobUpload.failure("cannot sync \(partial)")
                unlink(partial)
                throw failure
            }
            let folder = String(final[..<final.lastIndex(of: "/")!])
            try FileBlobUpload.makeDirectory(folder)
            guard rename(partial, final) == 0 else {
                let failure = FileBlobUpload.failure("cannot move \(partial) to \(final)")
                unlink(partial)
                throw failure
            }
            try FileBlobUpload.sync(directory: folder)
        }
        return try await record(written)
    }

    func cancel() async {
        if descriptor >= 0 {
            close(descriptor)
            descriptor = -1
            unlink(partial)
        }
        failed = true
    }

    static func makeDirectory(_ path: String) throws {
        do {
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        } catch {
            throw StoreError(.unavailable, "blob directory \(path)", "cannot create it", evidence: "\(error)")
        }
    }

    /// Syncs `directory` itself, so that a rename or a new name in it survives a crash.
    static func sync(directory: String) throws {
        let folder = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard folder >= 0 else { throw failure("cannot open \(directory)") }
        defer { close(folder) }
        guard fsync(folder) == 0 else { throw failure("cannot sync \(directory)") }
    }

    static func failure(_ reason: String) -> StoreError {
        StoreError(.unavailable, "blob file", reason, evidence: String(cString: strerror(errno)))
    }
}

/// A range of a blob's file, read with `pread` (no shared offset). Used by one task at a time.
final class FileBlobReading: BlobReading, @unchecked Sendable {
    let blob: StoredBlob
    let localFile: String?
    private var descriptor: Int32
    private var offset: Int64
    private let end: Int64

    init(blob: StoredBlob, path: String, range: Range<Int64>) throws {
        self.blob = blob
        localFile = path
        descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else {
            throw StoreError(
                .corrupt, "blob \(blob.hash)", "its row says it is whole, but its file cannot be opened",
                evidence: "\(path): \(String(cString: strerror(errno)))")
        }
        offset = range.lowerBound
        end = range.upperBound
    }

    deinit { close() }

    func next(maximumBytes: Int) async throws -> [UInt8]? {
        guard descriptor >= 0, offset < end else { return nil }
        let wanted = Int(min(Int64(max(maximumBytes, 1)), end - offset))
        var count = 0
        let bytes = [UInt8](unsafeUninitializedCapacity: wanted) { buffer, initialized in
            count = pread(descriptor, buffer.baseAddress!, wanted, off_t(offset))
            initialized = max(count, 0)
        }
        guard count > 0 else {
            throw StoreError(.corrupt, "blob \(blob.hash)", "its file ended before its size", evidence: "at byte \(offset) of \(blob.size)")
        }
        offset += Int64(count)
        return bytes
    }

    func close() {
        if descriptor >= 0 {
            _ = Glibc.close(descriptor)
            descriptor = -1
        }
    }
}

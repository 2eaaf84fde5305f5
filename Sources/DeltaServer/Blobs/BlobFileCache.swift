import DeltaCore
import Foundation
import NIOConcurrencyHelpers

/// This instance's local copies of blobs that its store keeps in the database (PostgreSQL), so
/// that a `GET` after the first is sent from a file with `sendfile`, as on SQLite
/// (`deltasnap serve --blob-cache DIR`). A blob is immutable and named by its hash, so a copy
/// never goes stale: one is kept only once the bytes streamed to a client hash to its name.
/// Access is decided by the store, except that a public verdict is kept for a second
/// (`publicVerdicts`); the cache only says where the bytes come from. Past `budget` bytes, the
/// least recently used copies go.
public final class BlobFileCache: Sendable {
    /// The directory: `<sha256>` files, and `partial/` for copies being made.
    public let directory: String
    /// The most bytes kept.
    public let budget: Int64
    /// The bytes kept, as last counted (nil: not counted yet).
    private let kept = NIOLockedValueBox<Int64?>(nil)
    /// "Anyone may read it" verdicts of the last second: what spares a public download its query.
    let publicVerdicts = PublicBlobVerdicts()

    /// A cache in `directory` (created when missing; throws when it cannot be), keeping at
    /// most `budget` bytes.
    public init(directory: String, budget: Int64) throws {
        self.directory = directory
        self.budget = budget
        try FileManager.default.createDirectory(atPath: directory + "/partial", withIntermediateDirectories: true)
        // Copies a crash left half made.
        for name in (try? FileManager.default.contentsOfDirectory(atPath: directory + "/partial")) ?? [] {
            try? FileManager.default.removeItem(atPath: "\(directory)/partial/\(name)")
        }
    }

    /// The file holding the whole blob `hash` of `size` bytes, when this cache has it; marks it used.
    func file(_ hash: BlobHash, size: Int64) -> String? {
        let path = "\(directory)/\(hash.hex)"
        guard let attributes = try? FileManager.default.attributesOfItem(atPath: path), (attributes[.size] as? Int).map(Int64.init) == size else {
            return nil
        }
        // Used now, for the eviction order (a few seconds' precision is enough).
        if let modified = attributes[.modificationDate] as? Date, modified.timeIntervalSinceNow < -5 {
            try? FileManager.default.setAttributes([.modificationDate: Date()], ofItemAtPath: path)
        }
        return path
    }

    /// Starts a copy of the blob `hash` as its bytes stream to a client, or nil when it would
    /// take more than a quarter of the budget.
    func fill(_ hash: BlobHash, size: Int64) -> BlobCacheFill? {
        guard size > 0, size <= budget / 4 else { return nil }
        let partial = "\(directory)/partial/\(UUID().uuidString.lowercased())"
        guard FileManager.default.createFile(atPath: partial, contents: nil), let handle = FileHandle(forWritingAtPath: partial) else { return nil }
        return BlobCacheFill(cache: self, hash: hash, size: size, partial: partial, handle: handle)
    }

    /// Names the copy at `partial`, whose bytes hash to `hash`, then evicts past the budget.
    func keep(_ partial: String, as hash: BlobHash, size: Int64) {
        guard (try? FileManager.default.moveItem(atPath: partial, toPath: "\(directory)/\(hash.hex)")) != nil else {
            try? FileManager.default.removeItem(atPath: partial)
            return
        }
        let total = kept.withLockedValue { kept -> Int64? in
            kept = kept.map { $0 + size }
            return kept
        }
        if total == nil || total! > budget { evict() }
    }

    /// Removes the least recently used copies until those kept fit the budget, and counts them.
    private func evict() {
        let keys: [URLResourceKey] = [.fileSizeKey, .contentModificationDateKey, .isRegularFileKey]
        let entries = (try? FileManager.default.contentsOfDirectory(at: URL(fileURLWithPath: directory), includingPropertiesForKeys: keys)) ?? []
        var files: [(path: String, size: Int64, used: Date)] = []
        for entry in entries {
            guard let values = try? entry.resourceValues(forKeys: Set(keys)), values.isRegularFile == true, (try? BlobHash(entry.lastPathComponent)) != nil
            else { continue }
            files.append((entry.path, Int64(values.fileSize ?? 0), values.contentModificationDate ?? .distantPast))
        }
        var total = files.reduce(0) { $0 + $1.size }
        // A copy used in the last few seconds may be on its way out (`file` marks it used at
        // most every 5 s, and the route opens it only once the headers are sent): never those.
        let recent = Date().addingTimeInterval(-10)
        for file in files.sorted(by: { $0.used < $1.used }) where total > budget && file.used < recent {
            try? FileManager.default.removeItem(atPath: file.path)
            total -= file.size
        }
        kept.withLockedValue { $0 = total }
    }
}

/// One copy being made as a blob streams to a client: kept only if every byte came and they
/// hash to the blob's name; anything else (a client gone, a write that failed) drops it.
final class BlobCacheFill: @unchecked Sendable {
    private let cache: BlobFileCache
    private let hash: BlobHash
    private let size: Int64
    private let partial: String
    private var handle: FileHandle?
    private var hasher = SHA256()
    private var written: Int64 = 0

    fileprivate init(cache: BlobFileCache, hash: BlobHash, size: Int64, partial: String, handle: FileHandle) {
        (self.cache, self.hash, self.size, self.partial, self.handle) = (cache, hash, size, partial, handle)
    }

    deinit { cancel() }

    /// Appends the next bytes sent.
    func write(_ bytes: [UInt8]) {
        guard let handle else { return }
        hasher.update(bytes)
        do { try handle.write(contentsOf: bytes) } catch { return cancel() }
        written += Int64(bytes.count)
    }

    /// Every byte was sent: keeps the copy if they are the blob's.
    func finish() {
        guard let handle else { return }
        // Durable before it has the blob's name: after a power cut a copy is whole or absent.
        let synced = (try? handle.synchronize()) != nil
        try? handle.close()
        self.handle = nil
        guard synced, written == size, BlobHash(digest: hasher.finalize()) == hash else {
            try? FileManager.default.removeItem(atPath: partial)
            return
        }
        cache.keep(partial, as: hash, size: size)
    }

    /// Drops the copy (safe after `finish`, and twice).
    func cancel() {
        guard let handle else { return }
        try? handle.close()
        self.handle = nil
        try? FileManager.default.removeItem(atPath: partial)
    }
}

import DeltaCore
import Foundation

/// The baked snapshots a server offers by content (`deltasnap serve --snapshots DIR`): every
/// `*.snapshot` file in one directory, known by the SHA-256 of its bytes, so that a CDN can keep
/// each forever and an app build can fetch the current one.
///
/// The directory is read again when a request names a hash it does not know (a newly baked
/// file), at most once a second; each file is hashed once per size and modification time.
/// Requests never name a path: only a 64-hex hash, looked up here.
actor SnapshotDirectory {
    /// One snapshot file.
    struct Entry: Sendable {
        let url: URL
        let sha256: String
        let size: Int
        let modified: Date
        /// Each collection it holds, with the position of its token.
        let collections: [String: UInt64]
    }

    private let directory: URL
    private var entries: [String: Entry] = [:]
    private var lastScan: ContinuousClock.Instant?

    init(path: String) {
        directory = URL(fileURLWithPath: path, isDirectory: true)
    }

    /// The snapshot whose bytes hash to `sha256`, nil when there is none.
    func entry(_ sha256: String) -> Entry? {
        if let entry = entries[sha256] { return entry }
        scan()
        return entries[sha256]
    }

    /// The snapshot holding `collection` at the newest token (ties: the later file name).
    func current(_ collection: String) -> Entry? {
        scan()
        return entries.values.filter { $0.collections[collection] != nil }
            .max { ($0.collections[collection]!, $0.url.lastPathComponent) < ($1.collections[collection]!, $1.url.lastPathComponent) }
    }

    /// Reads the directory again, unless it did less than a second ago.
    private func scan() {
        if let lastScan, ContinuousClock.now - lastScan < .seconds(1) { return }
        lastScan = .now
        let known = Dictionary(entries.values.map { ($0.url.path, $0) }, uniquingKeysWith: { first, _ in first })
        var found: [String: Entry] = [:]
        let files =
            (try? FileManager.default.contentsOfDirectory(at: directory, includingPropertiesForKeys: [.fileSizeKey, .contentModificationDateKey])) ?? []
        for url in files where url.pathExtension == "snapshot" {
            guard let values = try? url.resourceValues(forKeys: [.fileSizeKey, .contentModificationDateKey]),
                let size = values.fileSize, let modified = values.contentModificationDate
            else { continue }
            if let entry = known[url.path], entry.size == size, entry.modified == modified {
                found[entry.sha256] = entry
            } else if let entry = Self.read(url, size: size, modified: modified) {
                found[entry.sha256] = entry
            }
        }
        entries = found
    }

    /// Hashes a file and reads its manifest; nil when it is not a readable snapshot.
    private static func read(_ url: URL, size: Int, modified: Date) -> Entry? {
        guard let handle = FileHandle(forReadingAtPath: url.path) else { return nil }
        defer { try? handle.close() }
        var hasher = SHA256()
        while let chunk = try? handle.read(upToCount: 1 << 20), !chunk.isEmpty { hasher.update(chunk) }
        guard let reader = try? SnapshotReader(reading: FileHandle(forReadingFrom: url)),
            case .manifest(let manifest) = try? reader.next()
        else { return nil }
        var collections: [String: UInt64] = [:]
        for item in manifest.collections {
            collections[item.name.rawValue] = (try? Token(entityTag: item.entityTag))?.position ?? 0
        }
        return Entry(url: url, sha256: hasher.hexDigest(), size: size, modified: modified, collections: collections)
    }
}

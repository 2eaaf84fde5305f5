import Foundation

/// One item read from a snapshot.
public enum SnapshotItem: Sendable, Equatable {
    /// The manifest: always the first item.
    case manifest(SnapshotManifest)
    /// A visible record of `collection`.
    case record(CollectionName, Record)
}

/// Reads and verifies a snapshot as it streams: gzip integrity, manifest, record order and
/// canonical form, counts, and the SHA-256 in the trailer. Memory stays bounded by one
/// compressed chunk and one record.
///
/// `next()` returns nil only after the whole file has been verified; any problem throws a
/// `WireError` of kind `.snapshot` or `.compression` that says what is wrong.
public final class SnapshotReader {
    private let source: () throws -> [UInt8]?
    private let inflater: Inflater
    private var pending: [UInt8] = []
    private var offset = 0
    private var sourceEnded = false
    private var hasher = SHA256()
    private var manifest: SnapshotManifest?
    private var collectionIndex = 0
    private var readInCollection = 0
    private var lastID: [UInt8]?
    private var lineNumber = 0
    private var done = false
    /// Decompressed bytes read so far.
    public private(set) var contentBytes = 0
    /// The SHA-256 of the content (hex), once the file has been read to its verified end.
    public private(set) var contentDigest: String?

    /// Reads compressed bytes from `source`, which returns nil at the end of the file.
    public init(source: @escaping () throws -> [UInt8]?) throws {
        self.source = source
        self.inflater = try Inflater()
    }

    /// Reads the file open in `handle`, 1 MiB at a time, closing it at its end.
    public convenience init(reading handle: FileHandle) throws {
        try self.init {
            let chunk = try handle.read(upToCount: 1 << 20) ?? Data()
            if chunk.isEmpty { try? handle.close() }
            return chunk.isEmpty ? nil : Array(chunk)
        }
    }

    /// The next item, or nil once the snapshot has been read to its verified end.
    public func next() throws -> SnapshotItem? {
        if done { return nil }
        guard let manifest else {
            guard let line = try nextLine() else { throw WireError(.snapshot, "the file is empty") }
            hasher.update(line + [UInt8(ascii: "\n")])
            let parsed = try SnapshotManifest(parsing: line)
            manifest = parsed
            skipEmptyCollections(parsed)
            return .manifest(parsed)
        }
        guard let line = try nextLine() else {
            throw WireError(.snapshot, "the file is truncated", evidence: "it ends after line \(lineNumber), before the trailer")
        }
        if collectionIndex == manifest.collections.count {
            try verifyTrailer(line, manifest)
            done = true
            return nil
        }
        hasher.update(line + [UInt8(ascii: "\n")])
        let collection = manifest.collections[collectionIndex].name
        let record: Record
        do { record = try Record(parsing: line) } catch { throw WireError(.snapshot, "line \(lineNumber) is not a record", evidence: "\(error)") }
        guard !record.hidden else { throw WireError(.snapshot, "line \(lineNumber) is a hidden record; snapshots hold visible records only", evidence: record.id) }
        guard record.body.elementsEqual(line) else { throw WireError(.snapshot, "line \(lineNumber) is not in canonical form", evidence: record.id) }
        let id = Array(record.id.utf8)
        if let lastID, !lastID.lexicographicallyPrecedes(id) {
            throw WireError(.snapshot, "line \(lineNumber) breaks the id order of \(collection)", evidence: "\(String(reflecting: record.id)) after \(String(reflecting: String(decoding: lastID, as: UTF8.self)))")
        }
        lastID = id
        readInCollection += 1
        skipEmptyCollections(manifest)
        return .record(collection, record)
    }

    private func skipEmptyCollections(_ manifest: SnapshotManifest) {
        while collectionIndex < manifest.collections.count && readInCollection == manifest.collections[collectionIndex].records {
            collectionIndex += 1
            readInCollection = 0
            lastID = nil
        }
    }

    private func verifyTrailer(_ line: [UInt8], _ manifest: SnapshotManifest) throws {
        guard let trailer = try? JSONValue(parsing: line), case .number(let count) = trailer["records"], case .string(let digest) = trailer["sha256"] else {
            throw WireError(.snapshot, "line \(lineNumber) should be the trailer", evidence: "more records than the manifest declares, or a damaged trailer")
        }
        guard Int(count) == manifest.totalRecords else {
            throw WireError(.snapshot, "the trailer's record count differs from the manifest", evidence: "\(count) vs \(manifest.totalRecords)")
        }
        let computed = hasher.hexDigest()
        guard digest == computed else {
            throw WireError(.snapshot, "the content does not match its SHA-256", evidence: "trailer \(digest.prefix(16))…, content \(computed.prefix(16))…")
        }
        contentDigest = computed
        if try nextLine() != nil || offset < pending.count {
            throw WireError(.snapshot, "data after the trailer", evidence: "line \(lineNumber)")
        }
    }

    /// The next line without its newline, or nil at the end of the (complete) stream.
    private func nextLine() throws -> [UInt8]? {
        while true {
            if let newline = pending[offset...].firstIndex(of: UInt8(ascii: "\n")) {
                let line = Array(pending[offset..<newline])
                contentBytes += line.count + 1
                offset = newline + 1
                lineNumber += 1
                return line
            }
            if sourceEnded {
                try inflater.requireFinished()
                if offset < pending.count {
                    throw WireError(.snapshot, "the last line has no newline", evidence: "line \(lineNumber + 1) is cut off")
                }
                return nil
            }
            if offset > 0 {
                pending.removeFirst(offset)
                offset = 0
            }
            if let chunk = try source() {
                try inflater.decompress(chunk) { pending.append(contentsOf: $0) }
            } else {
                sourceEnded = true
            }
        }
    }
}

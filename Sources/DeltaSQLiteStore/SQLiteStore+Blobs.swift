public import DeltaCore
import DeltaSQLite
public import DeltaStore
import Foundation

/// Blobs on the embedded store: bytes in files under `blobDirectory` (`ab/abcdef…`, named by
/// their hash), which blobs are whole in the `blobs` table. An upload writes a file in
/// `partial/`, syncs it, renames it into place and syncs the directory, and only then inserts the
/// row: a blob is visible only when its file is whole on disk. A crash between the rename and the
/// row leaves a file without a row, never a row without its file; the next upload of it adds the row.
extension SQLiteStore {
    public func blob(_ hash: BlobHash) async throws -> StoredBlob? {
        let connection = try await readers.checkout()
        defer { readers.checkin(connection) }
        return try sqlite { try storedBlob(hash, connection) }
    }

    public func beginUpload(_ hash: BlobHash, type: String, maximumBytes: Int64, uploader: String?) async throws -> any BlobUpload {
        try FileBlobUpload(hash: hash, type: type, maximumBytes: maximumBytes, directory: blobDirectory, record: recordBlob(hash, type, uploader))
    }

    public func beginUpload(
        _ hash: BlobHash, type: String, maximumBytes: Int64, uploader: String?, holder: String, offset: Int64
    ) async throws -> any BlobUpload {
        try await FileBlobUpload.resume(
            hash, type: type, maximumBytes: maximumBytes, directory: blobDirectory, holder: holder, offset: offset,
            record: recordBlob(hash, type, uploader))
    }

    public func keptUpload(_ hash: BlobHash, holder: String) async throws -> Int64 {
        FileBlobUpload.keptBytes(hash, holder: holder, in: blobDirectory)
    }

    /// What makes a whole upload's file the blob: its row, and its uploader's.
    private func recordBlob(_ hash: BlobHash, _ type: String, _ uploader: String?) -> @Sendable (Int64) async throws -> StoredBlob {
        { [self] size in
            let connection = try await writer.checkout()
            defer { writer.checkin(connection) }
            return try sqlite {
                try connection.statement(
                    """
                    INSERT OR IGNORE INTO blobs(hash, size, type, stored_at)
                    VALUES (?, ?, ?, (SELECT coalesce(max(position), 0) + 1 FROM commits))
                    """
                ).run(.text(hash.hex), .integer(size), .text(type))
                if let uploader {
                    try connection.statement("INSERT OR IGNORE INTO blob_uploaders(hash, user) VALUES (?, ?)").run(.text(hash.hex), .text(uploader))
                }
                guard let stored = try storedBlob(hash, connection) else {
                    throw StoreError(.corrupt, "blob \(hash)", "its row is missing right after it was written")
                }
                return stored
            }
        }
    }

    public func openBlob(_ hash: BlobHash, range: Range<Int64>) async throws -> (any BlobReading)? {
        guard let stored = try await blob(hash) else { return nil }
        let clamped = min(max(range.lowerBound, 0), stored.size)..<min(max(range.upperBound, 0), stored.size)
        return try FileBlobReading(blob: stored, path: FileBlobUpload.path(of: hash, in: blobDirectory), range: clamped)
    }

    public func referrers(of hash: BlobHash, in collections: [CollectionName]?, limit: Int) async throws -> [BlobReferrer] {
        let connection = try await readers.checkout()
        defer { readers.checkin(connection) }
        return try sqlite {
            let only = collections.map { names in " AND b.collection IN (" + names.map { _ in "?" }.joined(separator: ", ") + ")" } ?? ""
            let select = try connection.statement(
                """
                SELECT r.collection, r.id, r.body FROM blob_refs b JOIN records r ON r.collection = b.collection AND r.id = b.id
                WHERE b.hash = ? AND r.hidden = 0\(only) ORDER BY b.collection, b.id LIMIT ?
                """)
            defer { select.reset() }
            try select.bind([.text(hash.hex)] + (collections ?? []).map { .text($0.rawValue) } + [.integer(Int64(limit))])
            var found: [BlobReferrer] = []
            while try select.step() {
                guard let collection = try? CollectionName(select.string(0)) else { continue }
                found.append(BlobReferrer(collection: collection, record: Record(id: select.string(1), hidden: false, canonicalBody: select.bytes(2))))
            }
            return found
        }
    }

    public func holds(_ hash: BlobHash, uploadedBy user: String?) async throws -> Bool {
        let connection = try await readers.checkout()
        defer { readers.checkin(connection) }
        return try sqlite {
            try connection.integer(
                "SELECT 1 FROM blobs b WHERE b.hash = ?1 AND (?2 IS NULL OR EXISTS (SELECT 1 FROM blob_uploaders u WHERE u.hash = ?1 AND u.user = ?2))",
                .text(hash.hex), user.map { .text($0) } ?? .null) != nil
        }
    }

    public func blobTotals() async throws -> (blobs: Int, bytes: Int64) {
        let connection = try await readers.checkout()
        defer { readers.checkin(connection) }
        return try sqlite {
            let select = try connection.statement("SELECT count(*), coalesce(sum(size), 0) FROM blobs")
            defer { select.reset() }
            _ = try select.step()
            return (Int(select.int64(0)), select.int64(1))
        }
    }

    private func storedBlob(_ hash: BlobHash, _ connection: Connection) throws -> StoredBlob? {
        let select = try connection.statement("SELECT size, type FROM blobs WHERE hash = ?")
        defer { select.reset() }
        try select.bind([.text(hash.hex)])
        guard try select.step() else { return nil }
        return StoredBlob(hash: hash, size: select.int64(0), type: select.string(1))
    }
}

import DeltaAuthoring
import DeltaCore
import DeltaStore
import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Where `bake --blobs` reads the blobs the baked records reference.
enum BlobSource {
    /// The server's database: every blob it holds.
    case store(any BlobStore)
    /// A running server's `GET /blobs/{sha256}` under this base URL, with the owner's secret when given.
    case server(URL, secret: String?)
}

extension Bake {
    /// With `--blobs`, after the records: writes every blob they reference into the snapshot,
    /// in hash order, each checked against its hash as it is written. A blob the source does not
    /// have fails the bake, which leaves no file behind.
    func writeBlobs(_ writer: SnapshotWriter, from source: BlobSource) async throws {
        guard blobs else { return }
        let wanted = writer.referencedBlobs
        let progress = Progress(label: "blobs", total: wanted.count)
        let before = writer.blobBytes
        for (index, reference) in wanted.enumerated() {
            switch source {
            case .store(let store): try await copy(reference, from: store, into: writer)
            case .server(let base, let secret): try await download(reference, from: base, secret: secret, into: writer)
            }
            progress.update(done: index + 1, records: index + 1)
        }
        progress.finish()
        print("blobs: \(wanted.count), \(writer.blobBytes - before) bytes")
    }

    private func copy(_ reference: BlobReference, from store: any BlobStore, into writer: SnapshotWriter) async throws {
        guard let stored = try await store.blob(reference.hash), let reading = try await store.openBlob(reference.hash, range: 0..<stored.size) else {
            throw CommandFailure("bake --blobs: a baked record references blob \(reference.hash), which the database does not hold")
        }
        defer { reading.close() }
        try writer.beginBlob(stored.reference)
        while let bytes = try await reading.next(maximumBytes: 1 << 20) { try writer.writeBlobBytes(bytes) }
        try writer.endBlob()
    }

    private func download(_ reference: BlobReference, from base: URL, secret: String?, into writer: SnapshotWriter) async throws {
        let url = base.appendingPathComponent("blobs").appendingPathComponent(reference.hash.hex)
        let (file, response) = try await download(url, authorization: secret.map { "Bearer \($0)" })
        defer { try? FileManager.default.removeItem(at: file) }
        guard response.statusCode == 200 else {
            let hint =
                response.statusCode == 404 ? "not on the server, or not readable without the owner's secret (--write-token)" : "HTTP \(response.statusCode)"
            throw CommandFailure("\(url.absoluteString): a baked record references this blob, and it cannot be downloaded (\(hint))")
        }
        guard let handle = try? FileHandle(forReadingFrom: file) else { throw CommandFailure("\(url.absoluteString): the download vanished") }
        defer { try? handle.close() }
        let size = Int64((try? FileManager.default.attributesOfItem(atPath: file.path)[.size] as? Int) ?? 0)
        let type = response.value(forHTTPHeaderField: "Content-Type").flatMap { BlobReference.isMediaType($0) ? $0 : nil } ?? reference.type
        do {
            try writer.beginBlob(BlobReference(hash: reference.hash, size: size, type: type))
            while let bytes = try handle.read(upToCount: 1 << 20), !bytes.isEmpty { try writer.writeBlobBytes(bytes) }
            try writer.endBlob()
        } catch let error as WireError {
            throw CommandFailure("\(url.absoluteString): \(error)")
        }
    }
}

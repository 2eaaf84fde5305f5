import DeltaAuthoring
import DeltaCore
import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

extension Bake {
    /// Downloads `GET /api/NAME` (the full dataset) and bakes it, with the server's validators.
    func bakeFromServer(_ text: String, _ output: AtomicOutput) async throws -> SnapshotManifest {
        guard let url = URL(string: text), ["http", "https"].contains(url.scheme ?? ""), url.host != nil,
            url.pathComponents.count >= 3, url.pathComponents[url.pathComponents.count - 2] == "api",
            let name = try? CollectionName(url.lastPathComponent)
        else { throw CommandFailure("--url: expected http://HOST:PORT/api/COLLECTION (got \(String(reflecting: text)))") }
        let (body, response) = try await download(url)
        defer { try? FileManager.default.removeItem(at: body) }
        guard response.statusCode == 200 else {
            let detail = (try? String(contentsOf: body, encoding: .utf8)).map { String($0.prefix(300)).trimmingCharacters(in: .whitespacesAndNewlines) } ?? ""
            throw CommandFailure("\(text): the server answered \(response.statusCode), not 200 (\(detail))")
        }
        guard response.value(forHTTPHeaderField: DeltaHeader.mode) == "full",
            let entityTag = response.value(forHTTPHeaderField: "ETag"), let lastModified = response.value(forHTTPHeaderField: "Last-Modified")
        else { throw CommandFailure("\(text): not a DeltaSnapshot full dataset (Delta-Mode: full, ETag and Last-Modified are required)") }
        // Pass 1 checks the body and counts; pass 2 writes. Both stream from the downloaded file.
        var count = 0
        var previous: String?
        var digest = StateDigest.empty
        try readFullBody(body, collection: name, source: text) { record in
            guard !record.hidden else { throw CommandFailure("\(text): the full dataset holds a hidden record (\(record.id))") }
            if let previous, !previous.utf8.lexicographicallyPrecedes(record.id.utf8) {
                throw CommandFailure("\(text): records are not sorted by id (\(String(reflecting: record.id)) after \(String(reflecting: previous)))")
            }
            previous = record.id
            count += 1
            digest.add(body: record.body)
        }
        if let sent = response.value(forHTTPHeaderField: DeltaHeader.digest), StateDigest(hex: sent) != digest {
            throw CommandFailure("\(text): the records do not match the answer's Delta-Digest (\(sent.prefix(16))…, records \(digest.hex.prefix(16))…)")
        }
        let manifest = try SnapshotManifest(
            collections: [.init(name: name, entityTag: entityTag, lastModified: lastModified, records: count, digest: digest)], blobs: blobs)
        let progress = Progress(label: "bake", total: count)
        let writer = try SnapshotWriter(manifest: manifest) { try output.write($0) }
        var written = 0
        try readFullBody(body, collection: name, source: text) { record in
            try writer.append(body: record.body)
            written += 1
            if written % 10_000 == 0 { progress.update(done: written, records: written) }
        }
        progress.finish()
        try await writeBlobs(writer, from: .server(url.deletingLastPathComponent().deletingLastPathComponent(), secret: ownerSecret))
        try writer.finish()
        return manifest
    }

    /// GET with every cache off (and `authorization` when given); the body lands in a temporary file.
    func download(_ url: URL, authorization: String? = nil) async throws -> (URL, HTTPURLResponse) {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.urlCache = nil
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
        configuration.timeoutIntervalForRequest = 60
        let session = URLSession(configuration: configuration)
        defer { session.finishTasksAndInvalidate() }
        var request = URLRequest(url: url)
        request.cachePolicy = .reloadIgnoringLocalCacheData
        if let authorization { request.setValue(authorization, forHTTPHeaderField: "Authorization") }
        let kept = FileManager.default.temporaryDirectory.appendingPathComponent("deltasnap-bake-\(UUID().uuidString)")
        return try await withCheckedThrowingContinuation { continuation in
            session.downloadTask(with: request) { location, response, error in
                if let error {
                    continuation.resume(throwing: CommandFailure("\(url.absoluteString): cannot reach the server (\(error.localizedDescription))"))
                    return
                }
                guard let location, let http = response as? HTTPURLResponse else {
                    continuation.resume(throwing: CommandFailure("\(url.absoluteString): no HTTP response"))
                    return
                }
                do {
                    try FileManager.default.moveItem(at: location, to: kept)
                    continuation.resume(returning: (kept, http))
                } catch {
                    continuation.resume(throwing: CommandFailure("\(url.absoluteString): cannot keep the download (\(error))"))
                }
            }.resume()
        }
    }
}

/// Streams the records of a full-dataset body `{"NAME":[…]}` from `file` (gzip-encoded or not).
func readFullBody(_ file: URL, collection: CollectionName, source: String, _ each: (Record) throws -> Void) throws {
    guard let handle = try? FileHandle(forReadingFrom: file) else { throw CommandFailure("\(source): the download vanished") }
    defer { try? handle.close() }
    var body = EnvelopeReader(collection: collection)
    var decoder = ContentDecoder()
    do {
        while let chunk = try handle.read(upToCount: 1 << 20), !chunk.isEmpty {
            try decoder.decode(chunk) { try body.feed($0) }
            while let record = try body.next() { try each(record) }
        }
        try decoder.finish()
        try body.finish()
        while let record = try body.next() { try each(record) }
    } catch let error as WireError {
        throw CommandFailure("\(source): \(error)")
    }
}

import DeltaCore
import DeltaStore
import Foundation

extension Bake {
    /// The selection `--filter` and `--limit` ask for (`.everything` without them).
    func requestedSelection() throws -> Selection {
        do {
            return try Selection(filter: filter, limit: limit.map(String.init))
        } catch let error as WireError {
            throw CommandFailure("--filter/--limit: \(error)")
        }
    }

    /// `--url` with the selection added to its query, for baking from a running server.
    func selectionURL(_ text: String, _ selection: Selection) throws -> String {
        guard !selection.isEverything else { return text }
        guard var components = URLComponents(string: text), components.query == nil else {
            throw CommandFailure("--url: give the selection either in the URL's query or with --filter/--limit, not both")
        }
        components.percentEncodedQuery = selection.query
        return components.string ?? text
    }

    /// Bakes one collection's selection from the database: the records stream from one read
    /// transaction into a spool file (counted on the way, memory stays bounded), then into the
    /// snapshot, whose token is the selection's, so the app's first sync is a small delta.
    func bakeSelection(_ store: any ChangeStore, _ name: CollectionName, _ selection: Selection, _ output: AtomicOutput) async throws -> SnapshotManifest {
        let (start, _) = try await store.openSelectionRead(name, since: .nothing, client: nil)
        guard case .source(let source, let mode) = start, case .changes(let feed) = try await SelectionFeed.open(source, mode, selection: selection, mark: nil)
        else {
            throw CommandFailure("\(name): the database gave no full read of the collection")
        }
        defer { feed.close() }
        let spool = FileManager.default.temporaryDirectory.appendingPathComponent("deltasnap-bake-\(UUID().uuidString)")
        guard FileManager.default.createFile(atPath: spool.path, contents: nil), let handle = try? FileHandle(forWritingTo: spool) else {
            throw CommandFailure("\(spool.path): cannot write the spool file")
        }
        defer { try? FileManager.default.removeItem(at: spool) }
        var count = 0
        while let batch = try await feed.next(maximumBytes: 1 << 16) {
            var lines: [UInt8] = []
            batch.forEach { body, _ in
                lines.append(contentsOf: body)
                lines.append(UInt8(ascii: "\n"))
            }
            try handle.write(contentsOf: lines)
            count += batch.count
        }
        try handle.close()
        let manifest = try SnapshotManifest(collections: [
            .init(name: name, entityTag: feed.token.entityTag, lastModified: feed.token.lastModified, records: count, digest: feed.digest)
        ])
        let writer = try SnapshotWriter(manifest: manifest) { try output.write($0) }
        let progress = Progress(label: "bake", total: count)
        var written = 0
        let reader = try FileHandle(forReadingFrom: spool)
        defer { try? reader.close() }
        var pending: [UInt8] = []
        while let chunk = try reader.read(upToCount: 1 << 20), !chunk.isEmpty {
            pending.append(contentsOf: chunk)
            var start = 0
            while let end = pending[start...].firstIndex(of: UInt8(ascii: "\n")) {
                try writer.append(body: Array(pending[start..<end]))
                written += 1
                start = end + 1
            }
            pending.removeFirst(start)
            progress.update(done: written, records: written)
        }
        try writer.finish()
        progress.finish()
        try await store.recordBakes([(name, feed.token)])
        return manifest
    }
}

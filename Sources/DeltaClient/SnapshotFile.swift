import DeltaCore
import Foundation

/// Reads the bundled snapshot in 1 MiB pieces through DeltaCore's verifying `SnapshotReader`.
enum SnapshotFile {
    /// A verifying reader over the file at `url`.
    static func reader(_ url: URL) throws -> SnapshotReader {
        guard let handle = FileHandle(forReadingAtPath: url.path) else {
            throw ReplicaError(.snapshot, "cannot open the bundled snapshot", evidence: url.path)
        }
        return try SnapshotReader(reading: handle)
    }

    /// The manifest alone: the first line, without reading the records.
    static func manifest(_ url: URL) throws -> SnapshotManifest {
        do {
            guard case .manifest(let manifest) = try reader(url).next() else {
                throw ReplicaError(.snapshot, "the bundled snapshot has no manifest", evidence: url.path)
            }
            return manifest
        } catch let error as WireError {
            throw ReplicaError(.snapshot, "the bundled snapshot fails its checks", evidence: "\(url.lastPathComponent): \(error)")
        }
    }
}

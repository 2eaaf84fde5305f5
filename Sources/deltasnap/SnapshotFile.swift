import DeltaCore
import Foundation

/// Reads a snapshot file in 1 MiB pieces through a verifying `SnapshotReader`.
func openSnapshot(_ path: String) throws -> (SnapshotReader, Int) {
    guard let handle = FileHandle(forReadingAtPath: path) else {
        throw CommandFailure("\(path): cannot open for reading (missing or not readable)")
    }
    let size = (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) ?? 0
    let reader = try SnapshotReader(reading: handle)
    return (reader, size)
}

/// Reads and verifies a whole snapshot file: its manifest, record count, size, and the reader (for its digest).
func verifySnapshot(_ path: String) throws -> (manifest: SnapshotManifest, records: Int, size: Int, reader: SnapshotReader) {
    let (reader, size) = try openSnapshot(path)
    var manifest: SnapshotManifest?
    var records = 0
    do {
        while let item = try reader.next() {
            switch item {
            case .manifest(let value): manifest = value
            case .record: records += 1
            case .blob, .blobBytes, .blobEnd: break
            }
        }
    } catch {
        throw CommandFailure("\(path): \(error)")
    }
    guard let manifest else { throw CommandFailure("\(path): no manifest") }
    return (manifest, records, size, reader)
}

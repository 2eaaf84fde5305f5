import DeltaCore
import Foundation

/// Writes a file through a temporary sibling and renames it into place, so readers never see half a file.
struct AtomicOutput {
    let path: String
    let temporary: String
    let handle: FileHandle

    /// Creates the temporary file next to `path`; fails with a clear reason when the folder is not writable.
    init(path: String) throws {
        let url = URL(fileURLWithPath: path)
        let directory = url.deletingLastPathComponent().path
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: directory, isDirectory: &isDirectory), isDirectory.boolValue else {
            throw CommandFailure("\(path): cannot write (the folder \(directory) does not exist)")
        }
        self.path = path
        temporary = directory + "/." + url.lastPathComponent + ".tmp-\(getpid())"
        guard FileManager.default.createFile(atPath: temporary, contents: nil), let handle = FileHandle(forWritingAtPath: temporary) else {
            throw CommandFailure("\(path): cannot write (the folder \(directory) is not writable)")
        }
        self.handle = handle
    }

    /// Appends bytes.
    func write(_ bytes: [UInt8]) throws {
        try handle.write(contentsOf: bytes)
    }

    /// Flushes to disk and renames the file into place.
    func commit() throws {
        try handle.synchronize()
        try handle.close()
        guard rename(temporary, path) == 0 else {
            let reason = String(cString: strerror(errno))
            try? FileManager.default.removeItem(atPath: temporary)
            throw CommandFailure("\(path): cannot write (\(reason))")
        }
    }

    /// Removes the temporary file after a failure.
    func abandon() {
        try? handle.close()
        try? FileManager.default.removeItem(atPath: temporary)
    }
}

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
            }
        }
    } catch {
        throw CommandFailure("\(path): \(error)")
    }
    guard let manifest else { throw CommandFailure("\(path): no manifest") }
    return (manifest, records, size, reader)
}

/// A failure a command reports as one line and exit status 1.
struct CommandFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

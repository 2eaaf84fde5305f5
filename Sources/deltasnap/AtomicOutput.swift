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
        Self.removeAbandoned(of: url.lastPathComponent, in: directory)
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

    /// Removes the temporary files of `name` that processes killed mid-write left in `directory`:
    /// those whose process is gone (a live one's, or a name that is not a temporary, stays).
    static func removeAbandoned(of name: String, in directory: String) {
        let prefix = "." + name + ".tmp-"
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: directory) else { return }
        for entry in names where entry.hasPrefix(prefix) {
            guard let pid = Int32(entry.dropFirst(prefix.count)), pid > 0, kill(pid, 0) != 0, errno == ESRCH else { continue }
            try? FileManager.default.removeItem(atPath: directory + "/" + entry)
        }
    }

    /// Removes the temporary file after a failure.
    func abandon() {
        try? handle.close()
        try? FileManager.default.removeItem(atPath: temporary)
    }
}

import ArgumentParser
import DeltaCore
import Foundation

/// `deltasnap verify`: check a whole snapshot file.
struct Verify: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Check a snapshot file completely; exit 0 only if all of it checks out.",
        discussion:
            "Checks gzip integrity, the manifest, every record (visible, canonical, sorted), each collection's state digest, every blob against its hash (format 2.0), the counts and the SHA-256."
    )

    @Argument(help: ArgumentHelp("The snapshot file.", valueName: "file"))
    var file: String

    func run() async throws {
        let checked = try verifySnapshot(file)
        let blobs = checked.manifest.hasBlobs ? ", \(checked.reader.blobCount) blobs (\(checked.reader.blobBytes) bytes)" : ""
        print("\(file): ok, \(checked.records) records in \(checked.manifest.collections.count) collections\(blobs)")
    }
}

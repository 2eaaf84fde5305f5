import ArgumentParser
import DeltaCore
import Foundation

/// `deltasnap verify`: check a whole snapshot file.
struct Verify: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Check a snapshot file completely; exit 0 only if all of it checks out.",
        discussion: "Checks gzip integrity, the manifest, every record (visible, canonical, sorted), the counts and the SHA-256."
    )

    @Argument(help: ArgumentHelp("The snapshot file.", valueName: "file"))
    var file: String

    func run() async throws {
        let (reader, _) = try openSnapshot(file)
        var records = 0
        var collections = 0
        do {
            while let item = try reader.next() {
                switch item {
                case .manifest(let manifest): collections = manifest.collections.count
                case .record: records += 1
                }
            }
        } catch {
            throw CommandFailure("\(file): \(error)")
        }
        print("\(file): ok, \(records) records in \(collections) collections")
    }
}

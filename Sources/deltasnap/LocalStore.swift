import ArgumentParser
import DeltaClient
import Foundation

/// The `--store` of the commands that write locally (put, delete, resolve, conflicts, status):
/// an existing replica, made by `deltasnap sync`, and its outbox.
struct LocalStore: ParsableArguments {
    @Option(help: ArgumentHelp("The local replica (made by deltasnap sync).", valueName: "path"))
    var store: String

    /// The replica's files, for its outbox; the store must exist.
    func files() throws -> ReplicaFiles {
        guard FileManager.default.fileExists(atPath: store) else {
            throw CommandFailure("\(store): no such replica store (deltasnap sync --store \(store) --snapshot FILE --url URL makes one)")
        }
        return try ReplicaFiles(storeURL: URL(fileURLWithPath: store))
    }
}

import ArgumentParser
import DeltaClient
import DeltaCore
import Foundation

/// `deltasnap dump`: what a replica holds, for scripts and tests.
struct Dump: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print a replica's visible records of one collection as NDJSON, sorted by id.",
        discussion: """
            Each line is a record's canonical JSON (keys sorted, no white space), so two dumps \
            compare with diff or cmp. Reads one committed state; never touches the network.
            """
    )

    @Option(help: ArgumentHelp("The local replica (made by deltasnap sync).", valueName: "path"))
    var store: String

    @Option(help: ArgumentHelp("The collection to print.", valueName: "name"))
    var collection: String

    func run() async throws {
        _ = try CollectionName(collection)
        guard FileManager.default.fileExists(atPath: store) else { throw CommandFailure("\(store): no such replica store") }
        let reader = try ReplicaReader(storeURL: URL(fileURLWithPath: store))
        var output = NDJSONOutput()
        try reader.forEachRecord(in: collection) { output.append($0) }
        output.flush()
    }
}

import ArgumentParser
import DeltaClient
import DeltaCore
import Foundation

/// `deltasnap search`: full-text search over a replica, for scripts and tests.
struct Search: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print a replica's records that hold every word of TEXT, best match first, as NDJSON.",
        discussion: """
            The collection must be searchable: sync it once with --search COLLECTION (all string \
            members) or --search COLLECTION=name,city (those members). Case and diacritics are \
            ignored; the last word also matches as a prefix. Never touches the network.

            Example:
              deltasnap search --store replica.sqlite --collection airports "wellington intl"
            """
    )

    @Option(help: ArgumentHelp("The local replica (made by deltasnap sync).", valueName: "path"))
    var store: String

    @Option(help: ArgumentHelp("The collection to search.", valueName: "name"))
    var collection: String

    @Option(help: ArgumentHelp("Print at most N records.", valueName: "n"))
    var limit = 50

    @Option(help: ArgumentHelp("For benchmarks: run the search N times and print the median time of one run to stderr.", valueName: "n"))
    var `repeat` = 1

    @Argument(help: ArgumentHelp("The words to find.", valueName: "text"))
    var text: String

    func run() async throws {
        _ = try CollectionName(collection)
        guard FileManager.default.fileExists(atPath: store) else { throw CommandFailure("\(store): no such replica store") }
        guard limit >= 1 else { throw CommandFailure("--limit: must be at least 1 (got \(limit))") }
        let reader = try ReplicaReader(storeURL: URL(fileURLWithPath: store))
        NDJSONOutput.print(try timed(`repeat`) { try reader.search(text, in: collection, limit: limit) })
    }
}

import ArgumentParser
import DeltaClient
import DeltaCore
import Foundation

/// `deltasnap query`: an offline query over a replica, for scripts and tests.
struct Query: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print a replica's records that match a filter, as NDJSON.",
        discussion: """
            The filter language is the one selections use (docs/PROTOCOL.md, Selections), \
            evaluated by the same code as the server's. Reads one committed state, with the \
            app's pending writes over the server's data; never touches the network. An eq or in \
            on a member indexed with deltasnap sync --index reads only the rows the index finds.

            Example:
              deltasnap query --store replica.sqlite --collection airports \\
                --filter '{"iso_country":{"eq":"NZ"}}' --order-by name --limit 10
            """
    )

    @Option(help: ArgumentHelp("The local replica (made by deltasnap sync).", valueName: "path"))
    var store: String

    @Option(help: ArgumentHelp("The collection to query.", valueName: "name"))
    var collection: String

    @Option(help: ArgumentHelp("Only records that match this filter (JSON).", valueName: "json"))
    var filter: String?

    @Option(help: ArgumentHelp("Order by this top-level member (default: by id).", valueName: "member"))
    var orderBy: String?

    @Flag(help: "Largest first.")
    var descending = false

    @Option(help: ArgumentHelp("Print at most N records.", valueName: "n"))
    var limit: Int?

    @Option(help: ArgumentHelp("For benchmarks: run the query N times and print the median time of one run to stderr.", valueName: "n"))
    var `repeat` = 1

    func run() async throws {
        _ = try CollectionName(collection)
        guard FileManager.default.fileExists(atPath: store) else { throw CommandFailure("\(store): no such replica store") }
        if let limit, limit < 1 { throw CommandFailure("--limit: must be at least 1 (got \(limit))") }
        let parsed: Filter?
        do { parsed = try filter.map { try Filter(parsing: $0) } } catch let error as WireError { throw CommandFailure("--filter: \(error)") }
        let reader = try ReplicaReader(storeURL: URL(fileURLWithPath: store))
        NDJSONOutput.print(try timed(`repeat`) { try reader.query(collection, filter: parsed, orderBy: orderBy, descending: descending, limit: limit) })
    }
}

/// Runs `body` `runs` times (at least once) and returns its last result; with more than one
/// run, prints the median wall time of one run to stderr (`median query ms: 1.234`).
func timed(_ runs: Int, _ body: () throws -> [Record]) throws -> [Record] {
    var times: [Double] = []
    var result: [Record] = []
    for _ in 0..<max(1, runs) {
        let start = DispatchTime.now().uptimeNanoseconds
        result = try body()
        times.append(Double(DispatchTime.now().uptimeNanoseconds - start) / 1e6)
    }
    if runs > 1 { FileHandle.standardError.write(Data("median ms: \(String(format: "%.3f", times.sorted()[times.count / 2]))\n".utf8)) }
    return result
}

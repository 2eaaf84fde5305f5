import ArgumentParser
import DeltaClient
import Foundation

/// `deltasnap resolve`: settles one conflict.
struct Resolve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Settle one conflict: keep the server's copy, or keep the local version.",
        discussion: """
            --keep server drops the local write (the server's copy shows at once); --keep local \
            queues the local version again, on top of the server's current version, for the next \
            deltasnap sync. (The library also takes a merged record: Replica.resolve(_:in:.merged(record)).)

            Example:
              deltasnap resolve --store replica.sqlite --collection notes n1 --keep local
            """
    )

    /// Which side wins.
    enum Side: String, ExpressibleByArgument, CaseIterable {
        case server, local
    }

    @OptionGroup var local: LocalStore

    @Option(help: ArgumentHelp("The collection.", valueName: "name"))
    var collection: String

    @Argument(help: ArgumentHelp("The conflicted record's id.", valueName: "id"))
    var id: String

    @Option(help: ArgumentHelp("Which version wins: server or local.", valueName: "side"))
    var keep: Side

    func run() async throws {
        try local.files().resolve(id, in: collection, keep == .server ? .keepServer : .keepLocal)
        print("\(collection)/\(id): resolved, keeping the \(keep.rawValue) version\(keep == .local ? " (pending)" : "")")
    }
}

import ArgumentParser
import DeltaClient
import Foundation

/// `deltasnap delete`: a local delete, as an app makes one offline.
struct Delete: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Delete one record from a replica locally; the next deltasnap sync pushes it.",
        discussion: """
            The record disappears from deltasnap dump at once; the server hides it (a tombstone \
            other clients receive as "hidden": true) when the next deltasnap sync pushes the delete.

            Example:
              deltasnap delete --store replica.sqlite --collection notes n1
            """
    )

    @OptionGroup var local: LocalStore

    @Option(help: ArgumentHelp("The collection.", valueName: "name"))
    var collection: String

    @Argument(help: ArgumentHelp("The record's id.", valueName: "id"))
    var id: String

    func run() async throws {
        try local.files().delete(id, in: collection)
        print("\(collection)/\(id): pending delete")
    }
}

import ArgumentParser
import DeltaClient
import DeltaCore
import Foundation

/// `deltasnap put`: a local write, as an app makes one offline.
struct Put: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Write one record into a replica locally; the next deltasnap sync pushes it.",
        discussion: """
            Reads one JSON object with a string "id" from FILE (or standard input) and writes it \
            into the replica's outbox: deltasnap dump shows it at once, deltasnap status counts it \
            as pending, and the next deltasnap sync --client-key KEY sends it to the server (push \
            before pull). Works without a network.

            Example:
              echo '{"id":"n1","text":"buy milk"}' | deltasnap put --store replica.sqlite --collection notes
            """
    )

    @OptionGroup var local: LocalStore

    @Option(help: ArgumentHelp("The collection to write.", valueName: "name"))
    var collection: String

    @Argument(help: ArgumentHelp("A file holding one JSON object; - or nothing for standard input.", valueName: "file"))
    var file: String = "-"

    func run() async throws {
        let data: Data
        if file == "-" {
            data = FileHandle.standardInput.readDataToEndOfFile()
        } else {
            guard let read = FileManager.default.contents(atPath: file) else { throw CommandFailure("\(file): cannot read the file") }
            data = read
        }
        let record: Record
        do { record = try Record(parsing: Array(data)) } catch { throw CommandFailure("\(file == "-" ? "standard input" : file): \(error)") }
        guard !record.hidden else { throw CommandFailure("record: \"hidden\" is not written with put (use deltasnap delete)") }
        try local.outbox().put(record, in: collection)
        print("\(collection)/\(record.id): pending")
    }
}

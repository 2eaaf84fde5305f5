import ArgumentParser
import DeltaClient
import DeltaCore
import Foundation

/// `deltasnap put`: a local write, as an app makes one offline.
struct Put: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Write records into a replica locally; the next deltasnap sync pushes them.",
        discussion: """
            Reads one JSON object with a string "id" from FILE (or standard input), or several \
            (NDJSON, or a JSON array), and writes them, in one transaction, \
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

    @Argument(help: ArgumentHelp("A file holding one JSON object (or NDJSON, or an array); - or nothing for standard input.", valueName: "file"))
    var file: String = "-"

    func run() async throws {
        let data: Data
        if file == "-" {
            data = FileHandle.standardInput.readDataToEndOfFile()
        } else {
            guard let read = FileManager.default.contents(atPath: file) else { throw CommandFailure("\(file): cannot read the file") }
            data = read
        }
        var reader = RecordReader()
        reader.feed(Array(data))
        reader.finish()
        var records: [Record] = []
        do {
            while let record = try reader.next() {
                guard !record.hidden else {
                    throw CommandFailure("record \(String(reflecting: record.id)): \"hidden\" is not written with put (use deltasnap delete)")
                }
                records.append(record)
            }
        } catch let error as WireError { throw CommandFailure("\(file == "-" ? "standard input" : file): \(error)") }
        guard !records.isEmpty else { throw CommandFailure("\(file == "-" ? "standard input" : file): no record to write") }
        try local.files().put(records, in: collection)
        print(records.count == 1 ? "\(collection)/\(records[0].id): pending" : "\(collection): \(records.count) records pending")
    }
}

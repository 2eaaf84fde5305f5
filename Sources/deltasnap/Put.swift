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

            --attach MEMBER=FILE copies FILE into the replica's blobs and sets the record's MEMBER to \
            its reference, {"$blob": "<sha256>", "size": N, "type": "..."} (the type from --type, \
            or guessed from the file's extension); the next sync uploads the file before the record, \
            so the server never holds a record whose file it lacks. One record only.

            Examples:
              echo '{"id":"n1","text":"buy milk"}' | deltasnap put --store replica.sqlite --collection notes
              echo '{"id":"p1"}' | deltasnap put --store replica.sqlite --collection posts --attach photo=cat.jpg
            """
    )

    @OptionGroup var local: LocalStore

    @Option(help: ArgumentHelp("The collection to write.", valueName: "name"))
    var collection: String

    @Option(help: ArgumentHelp("Attach a file as the member MEMBER of the record (repeatable).", valueName: "member=file"))
    var attach: [String] = []

    @Option(help: ArgumentHelp("The media type of the attached files (default: guessed from each file's extension).", valueName: "type"))
    var type: String?

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
        let files = try local.files()
        if !attach.isEmpty {
            guard records.count == 1 else { throw CommandFailure("--attach: attaches to one record, and the input holds \(records.count)") }
            records[0] = try Self.attaching(attach, type: type, to: records[0], files: files)
        }
        try files.put(records, in: collection)
        print(records.count == 1 ? "\(collection)/\(records[0].id): pending" : "\(collection): \(records.count) records pending")
    }

    /// `record` with each `MEMBER=FILE` of `attachments` attached and set.
    static func attaching(_ attachments: [String], type: String?, to record: Record, files: ReplicaFiles) throws -> Record {
        guard case .object(var members) = try JSONValue(parsing: record.body) else { return record }
        for attachment in attachments {
            let parts = attachment.split(separator: "=", maxSplits: 1)
            guard parts.count == 2, !parts[0].isEmpty, parts[0] != "id", !parts[1].isEmpty else {
                throw CommandFailure("--attach: expected MEMBER=FILE with a member other than id (got \(String(reflecting: attachment)))")
            }
            let path = String(parts[1])
            let media = type ?? MediaType.guess(path)
            let reference: BlobReference
            do { reference = try files.attach(contentsOf: URL(fileURLWithPath: path), type: media) } catch let error as ReplicaError {
                throw CommandFailure("--attach \(attachment): \(error)")
            }
            members.removeAll { $0.key == String(parts[0]) }
            members.append(JSONMember(key: String(parts[0]), value: reference.json))
            print("\(path): attached as \(reference.hash) (\(reference.size) bytes, \(reference.type))")
        }
        return try Record(value: .object(members))
    }
}

import ArgumentParser
import DeltaCore
import DeltaStore
import Foundation

/// `deltasnap import`: load records from a file into a collection, as one commit.
struct Import: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Import records from NDJSON, a JSON array or CSV into a collection, as one commit.",
        discussion: """
            JSON input is an array of records ([{"id":"a",...}, ...]) or NDJSON (one record per \
            line); each record is an object with a string "id" and may carry "hidden": true or \
            false. CSV input has a header row naming the members; --id-column names the column \
            that becomes "id". A quoted CSV field is a string; an unquoted empty field is null; an \
            unquoted field written exactly as a canonical number (12, -3.5) is a number; any other \
            field is a string (007, 1.50 and 1e3 stay as written).

            Records whose content did not change take no new position, so clients download \
            nothing for them (content is compared in canonical form: key order and number \
            spelling do not matter). With --replace the file is the complete new state of the \
            collection: records missing from it are hidden, and a hidden record that reappears \
            comes back; importing the same file twice changes nothing. The same id twice in one \
            import is an error; nothing is written then.

            Use - to read standard input. A progress bar is shown when stderr is a terminal.

            Example, a nightly dump:
              deltasnap import --db data.sqlite --collection runways --replace runways.csv
            """
    )

    @Option(help: ArgumentHelp(Database.help, valueName: "database"))
    var db = "deltasnap.sqlite"

    @Option(help: ArgumentHelp("The collection to import into ([A-Za-z0-9_-]{1,64}).", valueName: "name"))
    var collection: String

    @Option(help: ArgumentHelp("The identity (16 hex digits) for a database this import creates; for reproducible demo data only.", valueName: "hex"))
    var databaseID: String?

    @Option(help: ArgumentHelp("The input format: auto (.csv files are CSV; otherwise JSON or NDJSON), json, ndjson or csv.", valueName: "format"))
    var format: ImportFormat = .auto

    @Option(help: ArgumentHelp("For CSV: the column whose value becomes the record's \"id\".", valueName: "name"))
    var idColumn = "id"

    @Flag(help: "The file is the complete new state of the collection: hide every record it does not hold.")
    var replace = false

    @Argument(help: ArgumentHelp("The file to read, or - for standard input.", valueName: "file"))
    var file: String

    func validate() throws {
        do { _ = try CollectionName(collection) } catch { throw ValidationError("--collection: \(error)") }
        if let databaseID, databaseID.count != 16 || UInt64(databaseID, radix: 16) == nil || databaseID.lowercased() != databaseID {
            throw ValidationError("--database-id must be 16 lowercase hex digits (got \(databaseID))")
        }
    }

    func run() async throws {
        let name = try CollectionName(collection)
        let input: FileHandle
        var total: Int?
        if file == "-" {
            input = FileHandle.standardInput
        } else {
            guard let handle = FileHandle(forReadingAtPath: file) else {
                throw ValidationError("\(file): cannot open for reading (missing or not readable)")
            }
            input = handle
            total = (try? FileManager.default.attributesOfItem(atPath: file)[.size] as? Int) ?? nil
        }
        let store = try await Database(db).open(newDatabaseID: databaseID.flatMap { UInt64($0, radix: 16) })
        let progress = Progress(label: "import \(name)", total: total)
        let source = file
        let (format, idColumn, replace) = (self.format.resolved(for: file), self.idColumn, self.replace)
        let outcome = try await store.write(to: name) { transaction -> Int in
            var reader = format.reader(idColumn: idColumn)
            var read = 0
            while true {
                let chunk = try input.read(upToCount: 1 << 20) ?? Data()
                if chunk.isEmpty { reader.finish() } else { reader.feed(chunk) }
                read += chunk.count
                do {
                    while let record = try reader.next() { try await transaction.upsert(record) }
                } catch let error as WireError {
                    throw ValidationError("\(source): \(error)")
                }
                progress.update(done: read, records: reader.count)
                if chunk.isEmpty {
                    if replace {
                        guard reader.count > 0 else {
                            throw ValidationError(
                                "\(source): holds no records; --replace would hide the whole collection (an empty dump is more likely a failed export), so nothing was written"
                            )
                        }
                        try await transaction.hideUnwritten()
                    }
                    return reader.count
                }
            }
        }
        progress.finish()
        try await store.close()
        let commit = outcome.commit
        print(
            "imported \(outcome.value) records into \(name): \(commit.upserted) upserted, \(commit.hidden) hidden, "
                + "\(commit.unchanged) unchanged; " + (commit.committed ? "committed position \(commit.token.position)" : "nothing changed, no commit"))
    }
}

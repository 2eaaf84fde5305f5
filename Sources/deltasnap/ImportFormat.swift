import ArgumentParser
import DeltaAuthoring
import DeltaCore

/// `--format`: how `deltasnap import` reads its input.
enum ImportFormat: String, ExpressibleByArgument, CaseIterable {
    /// By the file name: `.csv` is CSV, anything else JSON or NDJSON (told apart by the first byte).
    case auto
    /// A JSON array of records or NDJSON.
    case json
    /// Also a JSON array of records or NDJSON (the reader tells them apart).
    case ndjson
    /// CSV with a header row.
    case csv

    /// The format for `file` once `auto` is resolved.
    func resolved(for file: String) -> ImportFormat {
        guard self == .auto else { return self }
        return file.lowercased().hasSuffix(".csv") ? .csv : .json
    }
}

/// What `deltasnap import` reads records from, whatever the input format.
protocol RecordSource {
    /// Adds a chunk of input.
    mutating func feed(_ chunk: some Collection<UInt8>)
    /// Marks the end of input.
    mutating func finish()
    /// The next record, or nil when more input is needed (or, after `finish()`, at the end).
    mutating func next() throws -> Record?
    /// Records read so far.
    var count: Int { get }
}

extension RecordReader: RecordSource {}
extension CSVRecordReader: RecordSource {}

extension ImportFormat {
    /// A reader for this format (resolved).
    func reader(idColumn: String) -> any RecordSource {
        self == .csv ? CSVRecordReader(idColumn: idColumn) : RecordReader()
    }
}

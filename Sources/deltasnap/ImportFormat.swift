import ArgumentParser
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

/// Records from the input, whatever its format.
enum InputRecords {
    case json(RecordReader)
    case csv(CSVRecordReader)

    /// A reader for `format` (resolved).
    init(_ format: ImportFormat, idColumn: String) {
        self = format == .csv ? .csv(CSVRecordReader(idColumn: idColumn)) : .json(RecordReader())
    }

    /// Adds a chunk.
    mutating func feed(_ chunk: some Collection<UInt8>) {
        switch self {
        case .json(var reader): reader.feed(chunk); self = .json(reader)
        case .csv(var reader): reader.feed(chunk); self = .csv(reader)
        }
    }

    /// Marks the end of input.
    mutating func finish() {
        switch self {
        case .json(var reader): reader.finish(); self = .json(reader)
        case .csv(var reader): reader.finish(); self = .csv(reader)
        }
    }

    /// The next record, or nil when more input is needed.
    mutating func next() throws -> Record? {
        switch self {
        case .json(var reader):
            defer { self = .json(reader) }
            return try reader.next()
        case .csv(var reader):
            defer { self = .csv(reader) }
            return try reader.next()
        }
    }

    /// Records read so far.
    var count: Int {
        switch self {
        case .json(let reader): return reader.count
        case .csv(let reader): return reader.count
        }
    }
}

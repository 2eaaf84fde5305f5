import DeltaCore
import Foundation

/// Records printed to stdout as NDJSON (one canonical body per line), in 64 KiB writes.
struct NDJSONOutput {
    private var out: [UInt8] = []

    /// Adds one record's line, writing when the buffer is full.
    mutating func append(_ record: Record) {
        out.append(contentsOf: record.body)
        out.append(UInt8(ascii: "\n"))
        if out.count >= 1 << 16 { flush() }
    }

    /// Writes what is buffered.
    mutating func flush() {
        FileHandle.standardOutput.write(Data(out))
        out.removeAll(keepingCapacity: true)
    }

    /// Prints `records` and flushes.
    static func print(_ records: [Record]) {
        var output = NDJSONOutput()
        records.forEach { output.append($0) }
        output.flush()
    }
}

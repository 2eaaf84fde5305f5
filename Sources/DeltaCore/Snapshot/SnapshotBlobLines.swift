import Foundation

/// How a snapshot's blob section spells a blob's bytes (docs/SNAPSHOT-FORMAT.md, *Blobs*): after
/// the blob's header line, one JSON string per 49,152 bytes (the last one shorter), each the
/// standard base64 of those bytes with padding (RFC 4648, section 4). 49,152 is a multiple of 3,
/// so only the last line can end in padding; a full line is 65,538 bytes (65,536 base64
/// characters and two quotes), within the reader's 1 MiB line buffer.
public enum SnapshotBlobLines {
    /// The bytes each line holds (all but the last).
    public static let bytesPerLine = 49_152

    /// How many lines hold a blob of `size` bytes (none for the empty blob).
    public static func lineCount(size: Int64) -> Int64 { (size + Int64(bytesPerLine) - 1) / Int64(bytesPerLine) }

    /// The line for `bytes` (at most `bytesPerLine`), without its newline: `"<base64>"`.
    public static func line(_ bytes: some Collection<UInt8>) -> [UInt8] {
        var line: [UInt8] = [0x22]
        line.append(contentsOf: Data(bytes).base64EncodedData())
        line.append(0x22)
        return line
    }

    /// The bytes of a line that must hold exactly `expected` bytes; refuses anything else,
    /// base64 that is not in its one canonical spelling included.
    public static func bytes(of line: UnsafeBufferPointer<UInt8>, expected: Int) throws -> [UInt8] {
        let encodedLength = (expected + 2) / 3 * 4
        guard line.count == encodedLength + 2, line.first == 0x22, line.last == 0x22 else {
            throw WireError(.snapshot, "a blob line is not the base64 of \(expected) bytes", evidence: "\(line.count) bytes long")
        }
        let text = Data(UnsafeBufferPointer(rebasing: line[1..<(line.count - 1)]))
        guard let decoded = Data(base64Encoded: text), decoded.count == expected else {
            throw WireError(.snapshot, "a blob line is not the base64 of \(expected) bytes", evidence: "not base64")
        }
        // Whole 3-byte groups have one spelling; a padded last group could hide stray bits.
        if expected % 3 != 0, decoded.suffix(expected % 3).base64EncodedData() != text.suffix(4) {
            throw WireError(.snapshot, "a blob line is not in canonical base64", evidence: "stray bits in its last group")
        }
        return Array(decoded)
    }
}

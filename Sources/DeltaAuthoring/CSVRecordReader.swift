import DeltaCore
import Foundation

/// Reads records from CSV (RFC 4180) with a header row, fed in chunks.
///
/// The header names the members; the `idColumn` becomes the record's `"id"` (always a string).
/// Every other field becomes JSON by one deterministic rule that keeps what the file says:
/// - a quoted field is a string, whatever it holds (`"007"`, `"18"`, `""`);
/// - an unquoted empty field is `null` (a missing value);
/// - an unquoted field that is exactly a number in canonical form (`12`, `-3.5`, `0.001`) is that
///   number; any other unquoted text (`007`, `1.50`, `1e3`, `N/A`) is a string, so no digit or
///   spelling is lost.
/// Memory stays bounded by the longest row plus one chunk.
public struct CSVRecordReader: Sendable {
    private struct Field: Sendable {
        var bytes: [UInt8]
        var quoted: Bool
    }

    private let idColumn: String
    private var buffer: [UInt8] = []
    private var offset = 0
    private var finished = false
    private var header: [String]?
    private var idIndex = 0
    private var line = 1
    /// How many records have been returned so far.
    public private(set) var count = 0

    /// Creates a reader whose records take their id from the column named `idColumn`.
    public init(idColumn: String = "id") {
        self.idColumn = idColumn
    }

    /// Adds the next chunk of input.
    public mutating func feed(_ chunk: some Collection<UInt8>) {
        if offset > 0 && offset >= buffer.count / 2 {
            buffer.removeFirst(offset)
            offset = 0
        }
        buffer.append(contentsOf: chunk)
    }

    /// Marks the end of input: the last row may then end without a newline.
    public mutating func finish() {
        finished = true
    }

    /// The next record, or nil when more input is needed (or, after `finish()`, at the end).
    public mutating func next() throws -> Record? {
        while true {
            guard let (fields, end, lines) = try parseRow() else { return nil }
            offset = end
            let rowLine = line
            line += lines
            if fields.count == 1 && fields[0].bytes.isEmpty && !fields[0].quoted { continue }  // a blank line
            guard let header else {
                try readHeader(fields)
                continue
            }
            guard fields.count == header.count else {
                throw WireError(.csv, "row has \(fields.count) fields, the header \(header.count)", evidence: "line \(rowLine)")
            }
            var members: [JSONMember] = []
            members.reserveCapacity(fields.count)
            for (index, field) in fields.enumerated() {
                let text = String(decoding: field.bytes, as: UTF8.self)
                guard Array(text.utf8) == field.bytes else {
                    throw WireError(.csv, "a field is not valid UTF-8", evidence: "line \(rowLine), column \(header[index])")
                }
                if index == idIndex {
                    members.append(JSONMember(key: "id", value: .string(text)))
                } else {
                    members.append(JSONMember(key: header[index], value: Self.value(text, quoted: field.quoted)))
                }
            }
            do {
                let record = try Record(value: .object(members))
                count += 1
                return record
            } catch let error as WireError {
                throw WireError(error.kind, error.reason, evidence: "line \(rowLine)" + (error.evidence.map { ", \($0)" } ?? ""), pointer: error.pointer)
            }
        }
    }

    /// The JSON value of one field, by the rule in the type's documentation.
    static func value(_ text: String, quoted: Bool) -> JSONValue {
        if quoted { return .string(text) }
        if text.isEmpty { return .null }
        if let canonical = CanonicalNumber.canonical(text), canonical == text { return .number(text) }
        return .string(text)
    }

    private mutating func readHeader(_ fields: [Field]) throws {
        let names = fields.map { String(decoding: $0.bytes, as: UTF8.self) }
        guard Set(names).count == names.count, !names.contains("") else {
            throw WireError(.csv, "the header row must name every column once", evidence: names.joined(separator: ","))
        }
        guard let index = names.firstIndex(of: idColumn) else {
            throw WireError(.csv, "no id column \(String(reflecting: idColumn)) in the header", evidence: names.prefix(10).joined(separator: ","))
        }
        if idColumn != "id", names.contains("id") {
            throw WireError(.csv, "the header has a column \"id\" besides the id column \(String(reflecting: idColumn))")
        }
        header = names
        idIndex = index
    }

    /// Parses one row from `offset`: its fields, the offset after it, and the newlines it spans;
    /// nil when the row is not complete yet (or, after `finish()`, at the end of input).
    private func parseRow() throws -> ([Field], Int, Int)? {
        var fields: [Field] = []
        var field = Field(bytes: [], quoted: false)
        var index = offset
        var inQuotes = false
        var afterQuote = false
        var lines = 0
        if index >= buffer.count { return nil }
        while index < buffer.count {
            let byte = buffer[index]
            if inQuotes {
                if byte == UInt8(ascii: "\"") {
                    if index + 1 < buffer.count {
                        if buffer[index + 1] == UInt8(ascii: "\"") {
                            field.bytes.append(byte)
                            index += 2
                            continue
                        }
                    } else if !finished {
                        return nil  // is it an escaped quote? The next chunk tells.
                    }
                    inQuotes = false
                    afterQuote = true
                } else {
                    if byte == 0x0A { lines += 1 }
                    field.bytes.append(byte)
                }
                index += 1
                continue
            }
            switch byte {
            case UInt8(ascii: ","):
                fields.append(field)
                field = Field(bytes: [], quoted: false)
                afterQuote = false
            case 0x0A:
                fields.append(field)
                return (fields, index + 1, lines + 1)
            case 0x0D where index + 1 == buffer.count && !finished:
                return nil  // is it CRLF? The next chunk tells.
            case 0x0D where index + 1 < buffer.count && buffer[index + 1] == 0x0A:
                break
            case UInt8(ascii: "\"") where field.bytes.isEmpty && !field.quoted:
                field.quoted = true
                inQuotes = true
            default:
                guard !afterQuote else {
                    throw WireError(.csv, "text after a closing quote", evidence: "line \(line + lines)")
                }
                field.bytes.append(byte)
            }
            index += 1
        }
        guard finished else { return nil }
        if inQuotes { throw WireError(.csv, "a quoted field is not closed", evidence: "line \(line) to the end of the input") }
        fields.append(field)
        return (fields, index, lines)
    }
}

import DeltaCore
import DeltaTestSupport
import Testing

@Suite("Record reader")
struct RecordReaderTests {
    private func readAll(_ text: String, chunkSizes: inout SeededGenerator) throws -> [Record] {
        var reader = RecordReader()
        var records: [Record] = []
        let bytes = Array(text.utf8)
        var offset = 0
        while offset < bytes.count {
            let size = Int(chunkSizes.next() % 17) + 1
            reader.feed(bytes[offset..<min(bytes.count, offset + size)])
            offset += size
            while let record = try reader.next() { records.append(record) }
        }
        reader.finish()
        while let record = try reader.next() { records.append(record) }
        return records
    }

    @Test("JSON arrays and NDJSON give the same records however the input is chunked")
    func chunked() throws {
        let lines = (0..<50).map { #"{"id":"r\#($0)","v":\#($0).0,"s":"a\"b\\c \u00e9"}"# }
        let array = "[\n" + lines.joined(separator: ",\n") + "\n]\n"
        let ndjson = lines.joined(separator: "\n") + "\n"
        for seed in UInt64(1)...20 {
            var generator = SeededGenerator(seed: seed)
            let fromArray = try readAll(array, chunkSizes: &generator)
            let fromLines = try readAll(ndjson, chunkSizes: &generator)
            #expect(fromArray.count == 50, "seed \(seed)")
            #expect(fromArray == fromLines, "seed \(seed)")
            #expect(fromArray.map(\.id) == (0..<50).map { "r\($0)" }, "seed \(seed)")
        }
    }

    @Test("Empty arrays and empty input give no records")
    func empty() throws {
        for text in ["[]", " [ ] \n", "", "\n\n"] {
            var generator = SeededGenerator(seed: 1)
            #expect(try readAll(text, chunkSizes: &generator).isEmpty)
        }
    }

    @Test(
        "Broken input names the record and the byte",
        arguments: [
            (#"[{"id":"a"},]"#, #"JSON: unexpected character "]" (record 2, at byte 12)"#),
            (#"[{"id":"a"}"#, "JSON: the array is not closed (input ended after 1 records)"),
            (#"[{"id":"a"}] x"#, "JSON: unexpected data after the array (at byte 13)"),
            (#"[{"id":"a"} {"id":"b"}]"#, "JSON: expected ',' or ']' between records (at byte 12)"),
            (#"{"id":"a"}\#n{"id":5}"#, #"record: "id" must be a string (record 2 at byte 11, found a number)"#),
        ])
    func broken(text: String, message: String) {
        var reader = RecordReader()
        reader.feed(Array(text.utf8))
        reader.finish()
        do {
            while try reader.next() != nil {}
            Issue.record("accepted \(text)")
        } catch {
            #expect("\(error)" == message)
        }
    }
}

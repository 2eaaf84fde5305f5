import DeltaAuthoring
import DeltaCore
import DeltaTestSupport
import Testing

@Suite("CSV record reader")
struct CSVTests {
    private func read(_ text: String, idColumn: String = "id", seed: UInt64? = nil) throws -> [String] {
        var reader = CSVRecordReader(idColumn: idColumn)
        var records: [String] = []
        let bytes = Array(text.utf8)
        var generator = SeededGenerator(seed: seed ?? 0)
        var offset = 0
        while offset < bytes.count {
            let size = seed == nil ? bytes.count : Int(generator.next() % 7) + 1
            reader.feed(bytes[offset..<min(bytes.count, offset + size)])
            offset += size
            while let record = try reader.next() { records.append(String(decoding: record.body, as: UTF8.self)) }
        }
        reader.finish()
        while let record = try reader.next() { records.append(String(decoding: record.body, as: UTF8.self)) }
        return records
    }

    @Test("quoted fields are strings, unquoted empty fields null, canonical numbers numbers, anything else a string as written")
    func fieldRules() throws {
        let text = """
            "id","name","n","code","price","exp","empty","missing","neg"
            1,"x",12,007,1.50,1e3,"",,-3.5
            "2","18",0,"0",0.25,N/A,"a,b",,-0

            """
        #expect(
            try read(text) == [
                #"{"code":"007","empty":"","exp":"1e3","id":"1","missing":null,"n":12,"name":"x","neg":-3.5,"price":"1.50"}"#,
                #"{"code":"0","empty":"a,b","exp":"N/A","id":"2","missing":null,"n":0,"name":"18","neg":"-0","price":0.25}"#,
            ])
    }

    @Test("quotes, commas, newlines inside quotes and CRLF, however the input is chunked; the last row may lack its newline")
    func quotingAndChunks() throws {
        let text = "id,text,n\r\nr1,\"a \"\"quoted\"\" word, and\na new line\",1\r\nr2,plain,2"
        let expected = [#"{"id":"r1","n":1,"text":"a \"quoted\" word, and\na new line"}"#, #"{"id":"r2","n":2,"text":"plain"}"#]
        #expect(try read(text) == expected)
        for seed in UInt64(1)...30 {
            #expect(try read(text, seed: seed) == expected, "chunk seed \(seed)")
        }
    }

    @Test("--id-column picks the id; the id is always a string")
    func idColumn() throws {
        #expect(try read("code,name\n42,\"x\"\n", idColumn: "code") == [#"{"id":"42","name":"x"}"#])
    }

    @Test("malformed CSV fails with the line and the reason")
    func errors() throws {
        let cases: [(String, String)] = [
            ("id,a\n1,2\n3\n", "CSV: row has 1 fields, the header 2 (line 3)"),
            ("id,a\n1,\"open\n", "CSV: a quoted field is not closed (line 2 to the end of the input)"),
            ("name,a\n1,2\n", "CSV: no id column \"id\" in the header (name,a)"),
            ("id,a,a\n1,2,3\n", "CSV: the header row must name every column once (id,a,a)"),
            ("id,a\n1,\"x\"y\n", "CSV: text after a closing quote (line 2)"),
            ("id,a\n,2\n", "record: \"id\" must not be empty (line 2)"),
        ]
        for (text, message) in cases {
            #expect {
                _ = try read(text)
            } throws: { error in
                "\(error)" == message
            }
        }
    }
}

import DeltaCore
import Foundation
import Testing

@Suite("Canonical JSON and records")
struct JSONTests {
    private func canonical(_ text: String) throws -> String {
        String(decoding: try JSONValue(parsing: Array(text.utf8)).canonicalBytes, as: UTF8.self)
    }

    @Test("Key order, white space and escapes do not change the canonical bytes")
    func canonicalForm() throws {
        #expect(try canonical(#" { "b" : [1, 2, {"z":null, "a":true}], "a":"x\u0041\n" } "#) == #"{"a":"xA\n","b":[1,2,{"a":true,"z":null}]}"#)
        #expect(try canonical(#"{"s":"\ud83d\ude00 \u00e9 \/"}"#) == "{\"s\":\"😀 é /\"}")
        #expect(try canonical(#"{"c":"\u0001"}"#) == #"{"c":"\u0001"}"#)
    }

    @Test(
        "Numbers print by their exact decimal value",
        arguments: [
            ("1", "1"), ("1.0", "1"), ("1e0", "1"), ("10e-1", "1"), ("0.1e1", "1"), ("-0", "0"), ("-0.0", "0"),
            ("100", "100"), ("1e2", "100"), ("1E+2", "100"), ("0.50", "0.5"), ("-12.340", "-12.34"),
            ("1e21", "1e+21"), ("123456789012345678901", "123456789012345678901"), ("0.000001", "0.000001"),
            ("0.0000001", "1e-7"), ("1.5e-7", "1.5e-7"), ("12345678901234567890.123", "12345678901234567890.123"),
            ("3.14159265358979323846264338327950288", "3.14159265358979323846264338327950288"),
        ])
    func numbers(input: String, expected: String) throws {
        #expect(try canonical("[\(input)]") == "[\(expected)]")
    }

    @Test(
        "Invalid JSON is refused with a reason and a byte offset",
        arguments: [
            (#"{"a":1,}"#, "JSON: expected a string key (at byte 7)"),
            (#"{"a":1 "b":2}"#, "JSON: expected ',' or '}' in object (at byte 7)"),
            (#"{"a":01}"#, #"JSON: invalid number "01" (at /a, byte 5)"#),
            (#"{"a":1}x"#, "JSON: unexpected data after the JSON value (at byte 7)"),
            (#"{"a":1,"a":2}"#, #"JSON: duplicate key in object ("a" in the object at byte 0)"#),
            (#"{"a":"\ud800"}"#, "JSON: unpaired UTF-16 surrogate escape (at /a, byte 12)"),
            (#"{"a":tru}"#, "JSON: invalid literal, expected true (at /a, byte 5)"),
            (#"{"a":"x"#, "JSON: unexpected end of input (at /a, byte 7)"),
            ("{\"a\":\"\t\"}", "JSON: control character in string (at /a, byte 6)"),
        ])
    func invalid(text: String, message: String) {
        do {
            _ = try JSONValue(parsing: Array(text.utf8))
            Issue.record("accepted \(text)")
        } catch {
            #expect("\(error)" == message)
        }
    }

    @Test("Invalid UTF-8 and deep nesting are refused")
    func hostile() {
        var bytes = Array(#"{"a":""#.utf8)
        bytes.append(contentsOf: [0xC3, 0x28])
        bytes.append(contentsOf: Array(#""}"#.utf8))
        #expect(throws: WireError.self) { try JSONValue(parsing: bytes) }
        let deep = String(repeating: "[", count: 65) + String(repeating: "]", count: 65)
        #expect(throws: WireError(.json, "nesting deeper than 64 levels", evidence: "at byte 64", pointer: String(repeating: "/0", count: 64))) {
            try JSONValue(parsing: Array(deep.utf8))
        }
        let fine = String(repeating: "[", count: 64) + String(repeating: "]", count: 64)
        #expect(throws: Never.self) { try JSONValue(parsing: Array(fine.utf8)) }
    }

    @Test("A record is an object with a string id; hidden is carried apart from the body")
    func records() throws {
        let record = try Record(parsing: Array(#"{"name":"x","id":"a1","hidden":true}"#.utf8))
        #expect(record.id == "a1")
        #expect(record.hidden)
        #expect(String(decoding: record.body, as: UTF8.self) == #"{"id":"a1","name":"x"}"#)
        #expect(String(decoding: record.wireJSON, as: UTF8.self) == #"{"hidden":true,"id":"a1","name":"x"}"#)
        let visible = try Record(parsing: Array(#"{"id":"a1","name":"x","hidden":false}"#.utf8))
        #expect(!visible.hidden)
        #expect(visible.body == record.body)
    }

    @Test(
        "Non-records are refused with the reason",
        arguments: [
            ("[1]", "record: must be a JSON object (found an array)"),
            (#"{"name":"x"}"#, #"record: missing the "id" member"#),
            (#"{"id":7}"#, #"record: "id" must be a string (found a number)"#),
            (#"{"id":""}"#, #"record: "id" must not be empty"#),
            (#"{"id":"a","hidden":"yes"}"#, #"record: "hidden" must be true or false (record "a" has a string)"#),
        ])
    func notRecords(text: String, message: String) {
        do {
            _ = try Record(parsing: Array(text.utf8))
            Issue.record("accepted \(text)")
        } catch {
            #expect("\(error)" == message)
        }
    }

    @Test("Equal values print the same canonical bytes: strings and keys equal only canonically (é precomposed and decomposed) are different values")
    func equalityIsByBytes() throws {
        let (composed, decomposed) = ("\u{E9}", "e\u{301}")
        #expect(composed == decomposed)  // Swift's strings: canonical equivalence
        let values = try [#"{"\#(composed)":1}"#, #"{"\#(decomposed)":1}"#, #"["\#(composed)"]"#, #"["\#(decomposed)"]"#, #""\u212a""#, #""K""#]
            .map { try JSONValue(parsing: Array($0.utf8)) }
        for a in values {
            for b in values { #expect((a == b) == (a.canonicalBytes == b.canonicalBytes), "\(a) \(b)") }
        }
        #expect(try Filter(parsing: #"{"id":{"eq":"\#(composed)"}}"#) != Filter(parsing: #"{"id":{"eq":"\#(decomposed)"}}"#))
        // Filters and selections whose members differ only so: each form of every filter shape.
        for shape in [
            #"{"M":{"eq":1}}"#, #"{"M":{"in":[1]}}"#, #"{"M":{"exists":true}}"#, #"{"M":{"has":1}}"#, #"{"and":[{"M":{"eq":1}}]}"#, #"{"not":{"M":{"eq":1}}}"#,
        ] {
            let (a, b) = try (
                Filter(parsing: Array(shape.replacingOccurrences(of: "M", with: composed).utf8)),
                Filter(parsing: Array(shape.replacingOccurrences(of: "M", with: decomposed).utf8))
            )
            #expect(a != b && a == a && b == b, "\(shape)")
            #expect(try Selection(filter: a, limit: nil) != Selection(filter: b, limit: nil), "\(shape)")
        }
        #expect(try Filter(parsing: #"{"a":{"eq":1}}"#) != Filter(parsing: #"{"a":{"ne":1}}"#))
        #expect(try Filter(parsing: #"{"and":[]}"#) != Filter(parsing: #"{"or":[]}"#))
    }

    @Test("Collection names are [A-Za-z0-9_-]{1,64}")
    func collectionNames() throws {
        #expect(try CollectionName("widgets_2-b").rawValue == "widgets_2-b")
        #expect(try CollectionName(String(repeating: "a", count: 64)).rawValue.count == 64)
        for bad in ["", String(repeating: "a", count: 65), "a b", "a/b", "..", "a;drop", "é", "a\0"] {
            #expect(throws: WireError.self) { try CollectionName(bad) }
        }
        #expect(throws: WireError(.collectionName, "only A-Z, a-z, 0-9, '_' and '-' are allowed", evidence: #""a/b""#)) {
            try CollectionName("a/b")
        }
    }
}

@Suite("Limits hold for the canonical form")
struct CanonicalLimitTests {
    private func refusal(_ text: String) -> String? {
        do {
            _ = try JSONValue(parsing: Array(text.utf8))
            return nil
        } catch {
            return "\(error)"
        }
    }

    @Test("Numbers whose canonical text breaks a limit are refused, naming the member")
    func outOfRangeOnceCanonical() {
        #expect(refusal(#"{"v":1000e99998}"#) == #"JSON: number "1e+100001" is exponent beyond ±100000 once written canonically (at /v, byte 5)"#)
        #expect(refusal(#"{"v":1000e99997}"#) == nil)
        #expect(
            refusal(#"{"a":[{"v":0.001e-99998}]}"#) == #"JSON: number "1e-100001" is exponent beyond ±100000 once written canonically (at /a/0/v, byte 11)"#)
        #expect(refusal(#"{"v":0.001e-99997}"#) == nil)
        let ones = String(repeating: "1", count: 1_018) + "e-1023"
        #expect(ones.utf8.count == 1_024)
        #expect(refusal(#"{"v":\#(ones)}"#)?.contains("longer than 1024 bytes once written canonically (1025 bytes)") == true)
        let nines = String(repeating: "9", count: 1_024)
        #expect(refusal("[\(nines)]")?.hasPrefix(#"JSON: number "9.999"#) == true)
        #expect(refusal("[\(nines)]")?.hasSuffix("(at /0, byte 1)") == true)
        #expect(refusal("[" + String(repeating: "9", count: 1_017) + "]") == nil)
        #expect(refusal("[" + String(repeating: "9", count: 1_018) + "]") != nil)
    }

    @Test("Keys are the same only byte for byte: canonically equivalent spellings are two keys")
    func keysCompareByBytes() throws {
        let value = try JSONValue(parsing: Array(#"{"id":"x","o\u0308":1,"ö":2}"#.utf8))
        #expect(String(decoding: value.canonicalBytes, as: UTF8.self) == "{\"id\":\"x\",\"o\u{308}\":1,\"ö\":2}")
        #expect(refusal(#"{"ö":1,"\u00f6":2}"#) == #"JSON: duplicate key in object ("ö" in the object at byte 0)"#)
    }

    @Test("A member path escapes ~ and / as RFC 6901 says")
    func pointerEscapes() {
        #expect(refusal(#"{"a/b":{"c~d":[tru]}}"#) == "JSON: invalid literal, expected true (at /a~1b/c~0d/0, byte 15)")
    }

    @Test("Records nest 64 levels counting themselves, also inside a push or its answer")
    func depthCountsTheRecord() throws {
        let deep = String(repeating: "[", count: 63) + "1" + String(repeating: "]", count: 63)
        let record = try Record(parsing: Array(#"{"id":"a","v":\#(deep)}"#.utf8))
        #expect(throws: WireError.self) { try Record(parsing: Array(#"{"id":"a","v":[\#(deep)]}"#.utf8)) }
        let push = PushRequest(client: "c", mutations: [Mutation(id: 1, collection: try CollectionName("w"), put: record, base: nil)])
        #expect(try PushRequest(parsing: push.bytes) == push)
        let spaced = String(decoding: push.bytes, as: UTF8.self).replacingOccurrences(of: ",", with: ", ")
        #expect(try PushRequest(parsing: Array(spaced.utf8)) == push)
        let answer = PushResponse(lastMutationID: 1, results: [MutationResult(id: 1, status: .conflict, server: record, base: nil)])
        #expect(try PushResponse(parsing: answer.json.canonicalBytes) == answer)
    }
}

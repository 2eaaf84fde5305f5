import DeltaCore
import DeltaTestSupport
import Foundation
import Testing

/// docs/conformance/: what a second implementation tests itself against, generated here and
/// compared with the committed files, so they can never drift from the code.
/// `DELTASNAP_WRITE_VECTORS=1 swift test --filter Conformance` rewrites them.
@Suite("Conformance vectors: canonical JSON, state digests, snapshots")
struct ConformanceVectorTests {
    /// Records as sent, each either read to its canonical wire form or refused.
    static func canonicalInputs() -> [(name: String, input: [UInt8])] {
        var inputs: [(String, String)] = [
            ("white space and key order", #" { "name" : "x" , "id" : "a" , "b" : [ 1 , 2 ] } "#),
            ("keys sort by UTF-8 bytes: upper case before lower case", #"{"id":"a","b":1,"B":2,"_":3,"a":4}"#),
            ("keys sort by UTF-8 bytes, not UTF-16: U+1F600 after U+FF61", #"{"id":"a","😀":1,"｡":2,"é":3}"#),
            ("a key that is a prefix of another sorts first", #"{"id":"a","ab":1,"a":2,"abc":3}"#),
            ("canonically equivalent keys are two keys", #"{"id":"a","o\u0308":1,"ö":2}"#),
            ("duplicate keys are refused", #"{"id":"a","x":1,"x":2}"#),
            ("duplicate keys spelled differently are refused", #"{"id":"a","x":1,"\u0078":2}"#),
            ("escapes written short: quote, backslash, newline, return, tab", #"{"id":"a","s":"\"\\\n\r\t"}"#),
            ("backspace and form feed are written \\u0008 and \\u000c", #"{"id":"a","s":"\b\f"}"#),
            ("other control characters as lowercase \\u00xx", #"{"id":"a","s":"\u0000\u0001\u001F\u001f\u000B"}"#),
            ("slash, DEL, U+2028, U+2029 and non-ASCII are never escaped", #"{"id":"a","s":"\/\u007F\u2028\u2029\u00e9\u20AC"}"#),
            ("a surrogate pair becomes one UTF-8 character", #"{"id":"a","s":"\ud83d\ude00"}"#),
            ("a lone high surrogate is refused", #"{"id":"a","s":"\ud83d"}"#),
            ("a lone low surrogate is refused", #"{"id":"a","s":"\ude00"}"#),
            ("a raw control character in a string is refused", "{\"id\":\"a\",\"s\":\"\u{1}\"}"),
            ("an unknown escape is refused", #"{"id":"a","s":"\x41"}"#),
            ("hidden true goes first on the wire", #"{"id":"a","z":1,"hidden":true}"#),
            ("hidden false is not part of the record", #"{"id":"a","hidden":false}"#),
            ("hidden must be a boolean", #"{"id":"a","hidden":1}"#),
            ("the id must be a string", #"{"id":1}"#),
            ("the id must not be empty", #"{"id":""}"#),
            ("a record must be an object", #"["id","a"]"#),
            ("a record needs an id", #"{"name":"x"}"#),
            ("trailing commas are refused", #"{"id":"a",}"#),
            ("comments are refused", #"{"id":"a"/* no */}"#),
            ("two values are refused", #"{"id":"a"}{"id":"b"}"#),
            ("leading zeros are refused", #"{"id":"a","v":01}"#),
            ("a plus sign is refused", #"{"id":"a","v":+1}"#),
            ("a bare point is refused", #"{"id":"a","v":1.}"#),
            ("NaN is refused", #"{"id":"a","v":NaN}"#),
            ("literals are lower case", #"{"id":"a","v":True}"#),
        ]
        for (number, name) in [
            ("1.0", "1.0"), ("-0", "minus zero"), ("0.0e5", "zero with an exponent"), ("1E+2", "E and plus"), ("10e-1", "10e-1"),
            ("0.1e1", "0.1e1"), ("1e20", "1e20, the last plain exponent"), ("1e21", "1e21, the first scientific"),
            ("123e18", "123e18"), ("1.5e20", "1.5e20"), ("0.000001", "1e-6 written plain"), ("1e-6", "1e-6"), ("1e-7", "1e-7, the first scientific below 1"),
            ("0.0000001", "0.0000001"), ("-12.340", "trailing zeros"), ("123456789012345678901", "21 digits"), ("1234567890123456789012", "22 digits"),
            ("3.14159265358979323846264338327950288", "digits beyond a double's"), ("9007199254740993", "2^53 + 1 exactly"),
        ] {
            inputs.append(("number: \(name)", #"{"id":"a","v":\#(number)}"#))
        }
        var random = SeededGenerator(seed: 25)
        for (index, number) in LimitCases.numbers(&random).enumerated() {
            inputs.append(("number at a limit \(index + 1)", #"{"id":"a","v":\#(number)}"#))
        }
        for (index, id) in LimitCases.ids().enumerated() { inputs.append(("id at the 512-byte limit \(index + 1)", #"{"id":\#(id)}"#)) }
        for depth in [64, 65] {
            for arrays in [true, false] {
                inputs.append(
                    (
                        "a record \(depth) levels deep in \(arrays ? "arrays" : "objects")",
                        #"{"id":"a","v":\#(LimitCases.nested(record: depth, arrays: arrays))}"#
                    ))
            }
        }
        var out = inputs.map { ($0.0, Array($0.1.utf8)) }
        out.append(("invalid UTF-8 is refused", Array(#"{"id":"a","s":""#.utf8) + [0xC3, 0x28] + Array(#""}"#.utf8)))
        out.append(("an overlong UTF-8 encoding is refused", Array(#"{"id":"a","s":""#.utf8) + [0xC0, 0xAF] + Array(#""}"#.utf8)))
        out.append(("a UTF-8 surrogate is refused", Array(#"{"id":"a","s":""#.utf8) + [0xED, 0xA0, 0x80] + Array(#""}"#.utf8)))
        return out
    }

    @Test("canonical-json.json: each input record read to its canonical wire bytes, or refused")
    func canonicalJSON() throws {
        var cases: [JSONValue] = []
        var refused = 0
        for (name, input) in Self.canonicalInputs() {
            var members: [JSONMember] = [JSONMember(key: "name", value: .string(name))]
            if let text = String(validating: input, as: UTF8.self) {
                members.append(JSONMember(key: "input", value: .string(text)))
            } else {
                members.append(JSONMember(key: "inputHex", value: .string(input.map { String(format: "%02x", $0) }.joined())))
            }
            do {
                let record = try Record(parsing: input)
                members.append(JSONMember(key: "canonical", value: .string(String(decoding: record.wireJSON, as: UTF8.self))))
            } catch let error as WireError {
                refused += 1
                members.append(JSONMember(key: "refused", value: .string(error.reason)))
            }
            cases.append(.object(members.sorted { $0.key.utf8.lexicographicallyPrecedes($1.key.utf8) }))
        }
        #expect(refused > 20 && refused < cases.count - 20, "the inputs stopped covering both answers")
        let file = ConformanceFile.cases(
            cases,
            note:
                "Each input is a record as a writer sends it. A conforming reader turns it into exactly the canonical wire bytes, or refuses it; refused gives the reference implementation's reason, for information."
        )
        #expect(try ConformanceFile.check("canonical-json.json", file) == nil)
    }

    @Test("state-digests.json: sets of wire records and the state digest of their visible ones")
    func stateDigests() throws {
        var random = SeededGenerator(seed: 7)
        let many = (0..<100).map { #"{"id":"r\#($0)","n":\#(random.next() % 1_000),"s":"\#(String(random.next(), radix: 36))"}"# }
        let sets: [(String, [String])] = [
            ("the empty set", []),
            ("one record", [#"{"id":"a"}"#]),
            ("two records", [#"{"id":"a"}"#, #"{"id":"b","n":1}"#]),
            ("the same two in the other order: the sum does not depend on order", [#"{"id":"b","n":1}"#, #"{"id":"a"}"#]),
            ("a hidden record adds nothing", [#"{"id":"a"}"#, #"{"hidden":true,"id":"c","n":3}"#]),
            ("only hidden records: the empty digest", [#"{"hidden":true,"id":"a"}"#]),
            ("non-ASCII and escapes, hashed as canonical UTF-8", [#"{"id":"é","s":"😀\n\u0001"}"#]),
            ("a hundred records", many),
        ]
        var cases: [JSONValue] = []
        for (name, records) in sets {
            let parsed = try records.map { try Record(parsing: Array($0.utf8)) }
            for (text, record) in zip(records, parsed) { #expect(record.wireJSON == Array(text.utf8), "not canonical: \(text)") }
            let digest = StateDigest(bodies: parsed.filter { !$0.hidden }.map(\.body))
            cases.append(.members(["name": .string(name), "records": .array(records.map { .string($0) }), "digest": .string(digest.hex)]))
        }
        let file = ConformanceFile.cases(
            cases,
            note:
                "records are wire records (hidden ones carry \"hidden\":true). digest is the state digest (docs/PROTOCOL.md, State digest) of the visible ones: the sum of the SHA-256 of each canonical body, modulo 2^256, as 64 lowercase hex digits."
        )
        #expect(try ConformanceFile.check("state-digests.json", file) == nil)
    }

    @Test("snapshots/: valid and damaged files, each with the verdict of a full read")
    func snapshots() throws {
        var cases: [JSONValue] = []
        for (name, file, note) in try SnapshotVectors.all() {
            let verdict: String
            do {
                let items = try SnapshotTests.read(file, chunk: 1 << 16)
                let records = items.count { if case .record = $0 { true } else { false } }
                let blobs = items.count { if case .blobEnd = $0 { true } else { false } }
                verdict = "ok: \(records) records" + (blobs > 0 ? ", \(blobs) blobs" : "")
            } catch {
                verdict = "refused: \(error)"
            }
            #expect(try ConformanceFile.check("snapshots/\(name).snapshot", file) == nil)
            cases.append(.members(["file": .string("snapshots/\(name).snapshot"), "what": .string(note), "verdict": .string(verdict)]))
        }
        #expect(cases.count(where: { $0["verdict"].map { if case .string(let text) = $0 { text.hasPrefix("ok") } else { false } } ?? false }) == 4)
        let file = ConformanceFile.cases(
            cases,
            note:
                "Snapshot files (docs/SNAPSHOT-FORMAT.md). A conforming reader accepts exactly the ones whose verdict starts ok (with that many records) and refuses the others, before it installs any record; the reason is the reference implementation's, for information."
        )
        #expect(try ConformanceFile.check("snapshots.json", file) == nil)
    }
}

import DeltaTestSupport
import Foundation
import Testing

@testable import DeltaCore

@Suite("Filters and selections")
struct FilterTests {
    func matches(_ filter: String, _ record: String) throws -> Bool {
        try Filter(parsing: filter).matches(JSONValue(parsing: Array(record.utf8)))
    }

    @Test("Comparisons follow the documented ordering: numbers by value, strings by code point, kinds never mix")
    func ordering() throws {
        #expect(try matches(#"{"n":{"eq":1}}"#, #"{"id":"a","n":1.0}"#))
        #expect(try matches(#"{"n":{"eq":1e2}}"#, #"{"id":"a","n":100}"#))
        #expect(try matches(#"{"n":{"lt":0.1}}"#, #"{"id":"a","n":0.09999999999999999999999}"#))
        #expect(try !matches(#"{"n":{"lt":0.1}}"#, #"{"id":"a","n":0.1000000000000000000001}"#))
        #expect(try matches(#"{"n":{"gt":-1}}"#, #"{"id":"a","n":-0.5}"#))
        #expect(try matches(#"{"n":{"lt":-1}}"#, #"{"id":"a","n":-1e3}"#))
        #expect(try matches(#"{"n":{"gte":0}}"#, #"{"id":"a","n":-0}"#))
        #expect(try matches(#"{"n":{"gt":9007199254740992}}"#, #"{"id":"a","n":9007199254740993}"#))  // past Double's exact integers
        #expect(try matches(#"{"s":{"lt":"é"}}"#, #"{"id":"a","s":"z"}"#))  // U+007A < U+00E9
        #expect(try matches(#"{"s":{"gt":"\uffff"}}"#, #"{"id":"a","s":"😀"}"#))  // U+1F600 > U+FFFF (UTF-16 order would say less)
        #expect(try matches(#"{"s":{"eq":"é"}}"#, #"{"id":"a","s":"\u00e9"}"#))
        #expect(try !matches(#"{"n":{"lt":"2"}}"#, #"{"id":"a","n":1}"#))  // different kinds: not less
        #expect(try matches(#"{"n":{"ne":"1"}}"#, #"{"id":"a","n":1}"#))  // but unequal
        #expect(try matches(#"{"b":{"lt":true}}"#, #"{"id":"a","b":false}"#))
        #expect(try matches(#"{"z":{"eq":null}}"#, #"{"id":"a","z":null}"#))
        #expect(try !matches(#"{"z":{"eq":null}}"#, #"{"id":"a"}"#))
        #expect(try !matches(#"{"o":{"eq":1}}"#, #"{"id":"a","o":[1]}"#))
    }

    @Test("A missing member matches nothing but exists: false; and, or, not combine")
    func missingAndCombinators() throws {
        for op in ["eq", "ne", "lt", "lte", "gt", "gte"] {
            #expect(try !matches(#"{"m":{"\#(op)":1}}"#, #"{"id":"a"}"#), "\(op) on a missing member")
        }
        #expect(try !matches(#"{"m":{"in":[1,null]}}"#, #"{"id":"a"}"#))
        #expect(try matches(#"{"m":{"exists":false}}"#, #"{"id":"a"}"#))
        #expect(try matches(#"{"m":{"exists":true}}"#, #"{"id":"a","m":null}"#))
        #expect(try matches(#"{"and":[]}"#, #"{"id":"a"}"#))
        #expect(try !matches(#"{"or":[]}"#, #"{"id":"a"}"#))
        #expect(try matches(#"{"not":{"m":{"eq":1}}}"#, #"{"id":"a"}"#))
        #expect(try matches(#"{"or":[{"m":{"eq":1}},{"and":[{"n":{"in":["x","y"]}},{"not":{"m":{"exists":true}}}]}]}"#, #"{"id":"a","n":"y"}"#))
    }

    @Test(
        "Bad filters get a clear error naming the problem",
        arguments: [
            (#"{"m":{"like":"x"}}"#, "unknown operator"),
            (#"{"m":{"eq":[1]}}"#, "scalars only"),
            (#"{"m":{"eq":{"a":1}}}"#, "scalars only"),
            (#"{"m":{"eq":1,"ne":2}}"#, "exactly one operator"),
            (#"{"m":{"eq":1},"n":{"eq":2}}"#, "exactly one key"),
            (#"{"and":{"m":{"eq":1}}}"#, "array of filters"),
            (#"{"m":{"exists":1}}"#, "true or false"),
            (#"{"m":{"in":1}}"#, "array of scalars"),
            (#"[1]"#, "exactly one key"),
            (#"{"m":"#, "not valid JSON"),
            (String(repeating: #"{"not":"#, count: 9) + #"{"m":{"eq":1}}"# + String(repeating: "}", count: 9), "nested deeper than 8"),
            ("{\"or\":[" + Array(repeating: #"{"m":{"eq":1}}"#, count: 65).joined(separator: ",") + "]}", "more than 64 conditions"),
            (#"{"m":{"in":["# + (0..<257).map(String.init).joined(separator: ",") + "]}}", "more than 256 values"),
            (#"{"m":{"eq":""# + String(repeating: "x", count: 5000) + #""}}"#, "longer than 4096 bytes"),
        ])
    func rejected(filter: String, says: String) {
        #expect {
            try Filter(parsing: filter)
        } throws: { error in
            let text = String(describing: error)
            return (error as? WireError)?.kind == .filter && text.contains(says)
        }
    }

    @Test("Limits: whole numbers from 1, and the fingerprint identifies the selection, not its spelling")
    func selections() throws {
        for bad in ["0", "-1", "1.5", "x", "", "99999999999"] {
            #expect(throws: WireError.self, "limit \(bad)") { try Selection(filter: nil, limit: bad) }
        }
        let a = try Selection(filter: #"{"n":{"lt":10}}"#, limit: "5")
        let b = try Selection(filter: #" { "n" : { "lt" : 1e1 } } "#, limit: "5")
        let c = try Selection(filter: #"{"n":{"lt":10}}"#, limit: "6")
        #expect(a.fingerprint == b.fingerprint)
        #expect(a.fingerprint != c.fingerprint)
        #expect(a.filterText == #"{"n":{"lt":10}}"#)
        #expect(Selection.everything.isEverything)
        #expect(try Selection(filter: #"{"c":{"eq":"é x"}}"#, limit: "5").query == "filter=%7B%22c%22%3A%7B%22eq%22%3A%22%C3%A9%20x%22%7D%7D&limit=5")
        #expect(try Selection(filter: nil, limit: "7").query == "limit=7")
        #expect(Selection.everything.query == "")
    }

    @Test("Numbers compare as exact decimals: random pairs agree with Foundation's Decimal")
    func randomNumbers() throws {
        let seed = SeededGenerator.seed(for: "FilterTests.randomNumbers")
        var random = SeededGenerator(seed: seed)
        func number() -> String {
            let sign = random.next() % 3 == 0 ? "-" : ""
            let whole = String(random.next() % 1000)
            let fraction = random.next() % 2 == 0 ? "" : "." + String(random.next() % 10000)
            let exponent = random.next() % 3 == 0 ? "e\(Int(random.next() % 7) - 3)" : ""
            return sign + whole + fraction + exponent
        }
        for _ in 0..<5000 {
            let (x, y) = (number(), number())
            let left = try #require(Decimal(string: x))
            let right = try #require(Decimal(string: y))
            let expected: JSONOrder = left < right ? .less : (left == right ? .equal : .greater)
            let actual = JSONOrder.compare(try JSONValue(parsing: Array(x.utf8)), try JSONValue(parsing: Array(y.utf8)))
            #expect(actual == expected, "seed \(seed): \(x) vs \(y)")
        }
    }

    @Test("The member scanner and the full parser agree on random canonical records and filters")
    func scannerAgrees() throws {
        let seed = SeededGenerator.seed(for: "FilterTests.scannerAgrees")
        var random = SeededGenerator(seed: seed)
        let scalars = [
            #"1"#, #"1.5e3"#, #"-0.25"#, #"true"#, #"false"#, #"null"#, #""a""#, #""a\"b""#, #""\\""#, #""é""#, #""}""#, #""a,b""#,
            // Longer than the scanner's eight-byte steps, with escapes near the edges of those steps.
            #""a long string, past eight bytes""#, #""abcdefg\"hijklmnop""#, #""abcdefgh\\""#, #""abcdefghi\u0041jk""#, #""éééééééé\"""#,
        ]
        let nested = [#"[1,{"a":"}"}]"#, #"{"a":[1,2],"b":{"c":"]"}}"#, #"[]"#, #"{}"#]
        let members = ["a", "b", "a\"b", "é", "id"]
        func value() -> String {
            random.next() % 5 == 0 ? nested[Int(random.next() % UInt64(nested.count))] : scalars[Int(random.next() % UInt64(scalars.count))]
        }
        func memberKey() -> String { members[Int(random.next() % UInt64(members.count))] }
        for round in 0..<3000 {
            var object: [String] = []
            var used = Set<String>()
            for _ in 0..<Int(random.next() % 5) {
                let key = memberKey()
                guard key != "id", used.insert(key).inserted else { continue }
                var encoded: [UInt8] = []
                JSONValue.writeString(key, into: &encoded)
                object.append(String(decoding: encoded, as: UTF8.self) + ":" + value())
            }
            let record = try Record(parsing: Array(("{\"id\":\"r\"" + object.map { "," + $0 }.joined() + "}").utf8))
            var encodedMember: [UInt8] = []
            JSONValue.writeString(memberKey(), into: &encodedMember)
            let member = String(decoding: encodedMember, as: UTF8.self)
            let op = ["eq", "ne", "lt", "gte"][Int(random.next() % 4)]
            let text =
                random.next() % 4 == 0
                ? #"{"or":[{\#(member):{"exists":true}},{"not":{\#(member):{"\#(op)":\#(scalars[Int(random.next() % UInt64(scalars.count))])}}}]}"#
                : #"{\#(member):{"\#(op)":\#(scalars[Int(random.next() % UInt64(scalars.count))])}}"#
            let filter = try Filter(parsing: text)
            let full = filter.matches(try JSONValue(parsing: record.body))
            #expect(
                FilterMatcher(filter).matches(body: record.body) == full,
                "seed \(seed) round \(round): \(text) on \(String(decoding: record.body, as: UTF8.self))")
            #expect(
                FilterMatcher(filter).scans(record.body), "seed \(seed) round \(round): the scanner gave up on \(String(decoding: record.body, as: UTF8.self))")
        }
    }
}

import DeltaCore
import DeltaTestSupport
import Foundation
import Testing

@testable import DeltaClient

/// Every shape a synthesized `Codable` model asks a decoder for.
private struct Shape: Codable, Equatable {
    enum Kind: String, Codable { case red, blue }
    enum Tagged: Codable, Equatable {
        case plain
        case sized(width: Int, label: String)
    }
    struct Nested: Codable, Equatable {
        var x: Int
        var y: [String]?
    }
    var id: String
    var i: Int?
    var d: Double?
    var f: Float?
    var u: UInt8?
    var s: String?
    var b: Bool?
    var a: [Int]?
    var n: Nested?
    var ns: [Nested]?
    var m: [String: Int]?
    var e: Kind?
    var t: Tagged?
    var when: Date?
}

/// A model that reads the types JSONDecoder treats specially with `try?`, as apps write them.
private struct Lenient: Decodable, Equatable {
    var id: String
    var link: URL?
    var when: Date?
    var bytes: Data?
    var price: Decimal?
    var ratio: Float

    enum CodingKeys: String, CodingKey { case id, link, when, bytes, price, ratio }

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        id = try container.decode(String.self, forKey: .id)
        link = try? container.decode(URL.self, forKey: .link)
        when = try? container.decode(Date.self, forKey: .when)
        bytes = try? container.decode(Data.self, forKey: .bytes)
        price = try? container.decode(Decimal.self, forKey: .price)
        ratio = (try? container.decode(Float.self, forKey: .ratio)) ?? -1
    }
}

@Suite("RecordDecoder: where it decodes a record, JSONDecoder decodes the same value")
struct RecordDecoderTests {
    /// A random JSON value of any kind, often not the kind the model wants.
    private func value(_ random: inout SeededGenerator, depth: Int = 0) -> String {
        // Quotes after backslashes: `tail \\` ends at its quote, `\\\"` holds one.
        let strings = [
            #""plain""#, #""é \"quoted\" \\ back""#, #""\u00e9\ud83d\ude00""#, #""""#, #""red""#, #""blue""#, #""line\nbreak""#, #""tail \\""#,
            #""\\\"\\""#,
        ]
        let numbers = ["0", "-7", "255", "256", "1.5", "-0.25", "1e3", "12345678901234567890", "3.4e39", "0.1"]
        switch Int.random(in: 0..<(depth > 1 ? 4 : 7), using: &random) {
        case 0: return numbers.randomElement(using: &random)!
        case 1: return strings.randomElement(using: &random)!
        case 2: return Bool.random(using: &random) ? "true" : "false"
        case 3: return "null"
        case 4: return "[" + (0..<Int.random(in: 0...3, using: &random)).map { _ in value(&random, depth: depth + 1) }.joined(separator: ",") + "]"
        case 5:
            let keys = ["x", "y", "plain", "sized", "width", "label", "k"].shuffled(using: &random).prefix(Int.random(in: 0...3, using: &random))
            return "{" + keys.map { #""\#($0)":\#(value(&random, depth: depth + 1))"# }.joined(separator: ",") + "}"
        default: return #"{"x":\#(Int.random(in: -5...5, using: &random)),"y":["a","b"]}"#
        }
    }

    @Test("random records with members of every kind: RecordDecoder never succeeds where JSONDecoder fails, and agrees where both succeed")
    func agreesWithJSONDecoder() throws {
        let seed = SeededGenerator.seed(for: "RecordDecoderTests.agreesWithJSONDecoder")
        var random = SeededGenerator(seed: seed)
        var (fast, both, neither, fallback) = (0, 0, 0, 0)
        for round in 0..<3000 {
            var members = [#""id":"r\#(round)""#]
            // Mostly a value of the kind the model wants, sometimes any value at all.
            let fitting: [String: [String]] = [
                "i": ["0", "-7", "42", "1.0", "1e2"], "d": ["1.5", "-0.25", "3", "0.1", "1e-3"], "f": ["0.1", "2.5", "3.4e39"],
                "u": ["0", "255", "256", "-1"], "s": [#""plain""#, #""é \"q\" \\ b""#, #""\u00e9\ud83d\ude00""#, #""""#, #""tail \\""#, #""\\\"\\""#],
                "b": ["true", "false"], "a": ["[]", "[1,2,3]", "[1,null]"],
                "n": [#"{"x":1}"#, #"{"x":2,"y":["a"]}"#, #"{"y":[]}"#, #"{"x":3,"y":["b \\","\"c\"",""]}"#],
                "ns": [#"[{"x":1},{"x":3,"y":null}]"#, "[]"], "m": [#"{"a":1,"b":2}"#, "{}"], "e": [#""red""#, #""blue""#, #""green""#],
                "t": [#"{"plain":{}}"#, #"{"sized":{"label":"L","width":3}}"#], "when": ["0", "1000.5"],
            ]
            for name in ["i", "d", "f", "u", "s", "b", "a", "n", "ns", "m", "e", "t", "when"] where Int.random(in: 0..<3, using: &random) == 0 {
                let good = Int.random(in: 0..<8, using: &random) > 0
                members.append(#""\#(name)":\#(good ? fitting[name]!.randomElement(using: &random)! : value(&random))"#)
            }
            let record = try Record(parsing: Array("{\(members.joined(separator: ","))}".utf8))
            let array = Array("[".utf8) + record.body + Array("]".utf8)
            let reference = try? JSONDecoder().decode([Shape].self, from: Data(array))
            let ours = try? RecordDecoder.decode([Shape].self, from: array)
            if let ours {
                fast += 1
                #expect(ours == reference, "seed \(seed), round \(round): \(String(decoding: record.body, as: UTF8.self))")
                if reference != nil { both += 1 }
            } else if reference == nil {
                neither += 1
            } else {
                fallback += 1
            }
        }
        print(
            "RecordDecoderTests: seed \(seed): \(fast) decoded by RecordDecoder (\(both) equal to JSONDecoder's), \(fallback) left to JSONDecoder, \(neither) by neither"
        )
        #expect(fast > 100, "seed \(seed): RecordDecoder decoded almost nothing")
    }

    @Test("strings that end in an escaped backslash, or hold escaped quotes, are read by RecordDecoder itself, as JSONDecoder reads them")
    func backslashesBeforeQuotes() throws {
        for text in [#"{"id":"tail \\","s":"\\\"\\","n":{"x":1,"y":["b \\","\"c\"",""]}}"#, #"{"id":"\\\\","s":"a\"b"}"#] {
            let body = try Record(parsing: Array(text.utf8)).body
            let ours = try RecordDecoder.decode(Shape.self, from: body)
            #expect(ours == (try JSONDecoder().decode(Shape.self, from: Data(body))), "\(text)")
        }
    }

    @Test("a model that catches what RecordDecoder cannot read (try? on URL, Date, Data, Decimal) gets JSONDecoder's values; a Float is rounded once")
    func caughtFallbacks() throws {
        let text = #"{"bytes":"AAEC","id":"x","link":"https://example.com/a","price":"12.5","ratio":1.0000000596046447753906250000000001,"when":1000.5}"#
        let body = try Record(parsing: Array(text.utf8)).body
        let reference = try JSONDecoder().decode(Lenient.self, from: Data(body))
        #expect(reference.link != nil && reference.when != nil && reference.bytes != nil)
        // RecordDecoder gives the record to JSONDecoder (it throws), never a model with nils.
        #expect(throws: RecordDecoder.Unsupported.self) { try RecordDecoder.decode(Lenient.self, from: body) }
        // A Float straight from the text, as JSONDecoder reads it: not through a Double.
        let float = Array(#"{"d":1.0,"f":1.0000000596046447753906250000000001,"id":"y"}"#.utf8)
        let ours = try RecordDecoder.decode(Shape.self, from: float)
        #expect(ours.f?.bitPattern == (try JSONDecoder().decode(Shape.self, from: Data(float))).f?.bitPattern)
        #expect(ours.f?.bitPattern == Float("1.0000000596046447753906250000000001")!.bitPattern)
    }

    @Test("a user's decoder settings that RecordDecoder cannot honour (userInfo, key strategies) send every record to JSONDecoder")
    func settings() {
        let plain = JSONDecoder()
        #expect(RecordDecoder.stands(in: plain))
        let snake = JSONDecoder()
        snake.keyDecodingStrategy = .convertFromSnakeCase
        #expect(!RecordDecoder.stands(in: snake))
        let informed = JSONDecoder()
        informed.userInfo[CodingUserInfoKey(rawValue: "k")!] = 1
        #expect(!RecordDecoder.stands(in: informed))
    }
}

import DeltaTestSupport
import Testing

@testable import DeltaCore

/// Random JSON text, sometimes canonical, often not: keys out of order, white space, other
/// escapes, other number spellings, duplicate keys, hidden members, invalid bytes.
private struct RandomJSON {
    var random: SeededGenerator

    mutating func chance(_ percent: UInt64) -> Bool { random.next() % 100 < percent }
    mutating func pick<T>(_ items: [T]) -> T { items[Int(random.next() % UInt64(items.count))] }

    mutating func space() -> String { chance(5) ? pick([" ", "\n", "\t", "  "]) : "" }

    mutating func number() -> String {
        switch random.next() % 6 {
        case 0: return String(Int64(bitPattern: random.next()) >> Int64(random.next() % 64))
        case 1: return "\(random.next() % 1000).\(String(format2: random.next() % 100))"
        case 2:
            return pick([
                "0", "-0", "1e5", "1E+2", "0.0000001", "0.000001", "1.50", "00", "1.", "-", "1e", "2.5e-3", "-0.0", "1e21", "123456789012345678901",
                "1234567890123456789012", "0.1e1", "+1", "1.2.3", "1-2",
            ])
        case 3: return "-\(random.next() % 100).\(random.next() % 10)"
        case 4: return "0.\(String(repeating: "0", count: Int(random.next() % 8)))\(1 + random.next() % 9)"
        default: return String(random.next() % 100)
        }
    }

    mutating func stringBody() -> String {
        var out = ""
        for _ in 0..<(random.next() % 24) {
            switch random.next() % 14 {
            case 0: out += "\\\""
            case 1: out += "\\\\"
            case 2: out += pick(["\\n", "\\r", "\\t", "\\/", "\\b", "\\f"])
            case 3: out += pick(["\\u0001", "\\u001f", "\\u001F", "\\u0041", "\\u00e9", "\\u000a", "\\ud83d\\ude00", "\\ud800", "\\u007f"])
            case 4: out += pick(["é", "😀", "\u{7F}", "中"])
            case 5: out += pick(["\u{01}", "\t"])
            default: out += String(UnicodeScalar(UInt8(ascii: "a") + UInt8(random.next() % 26)))
            }
        }
        return out
    }

    mutating func key() -> String { chance(70) ? pick(["a", "b", "id", "name", "hidden", "z", "é", "A", "a\\n", "a\\u0001", "a\\\""]) : stringBody() }

    mutating func value(depth: Int) -> String {
        switch random.next() % (depth > 3 ? 4 : 6) {
        case 0: return pick(["null", "true", "false", "nul", "True"])
        case 1: return number()
        case 2, 3: return "\"\(stringBody())\""
        case 4: return "[" + (0..<(random.next() % 4)).map { _ in space() + value(depth: depth + 1) + space() }.joined(separator: ",") + "]"
        default: return object(depth: depth + 1, top: false)
        }
    }

    mutating func object(depth: Int, top: Bool) -> String {
        var keys = (0..<(random.next() % 5)).map { _ in key() }
        if top && chance(90) { keys.append("id") }
        if chance(70) { keys.sort() }
        let members = keys.map { key -> String in
            let value =
                key == "id" && chance(85)
                ? "\"\(chance(80) ? String(random.next() % 1000) : stringBody())\""
                : (key == "hidden" && chance(50) ? pick(["true", "false"]) : value(depth: depth))
            return space() + "\"\(key)\"" + space() + ":" + space() + value + space()
        }
        return "{" + members.joined(separator: ",") + "}"
    }
}

extension String {
    fileprivate init(format2 value: UInt64) { self = value < 10 ? "0\(value)" : String(value) }
}

@Suite("CanonicalScanner: the snapshot reader's fast path agrees with the full parser")
struct CanonicalScannerTests {
    /// The full parser's verdict on a snapshot line: the id when it is a visible record whose canonical body is the line.
    private func parserVerdict(_ line: [UInt8]) -> String? {
        guard let record = try? Record(parsing: line), !record.hidden, record.body == line else { return nil }
        return record.id
    }

    private func scannerVerdict(_ line: [UInt8]) -> String? {
        line.withUnsafeBufferPointer { buffer in
            CanonicalScanner.record(buffer).map { String(decoding: buffer[$0], as: UTF8.self) }
        }
    }

    @Test("on random and mutated lines the scanner never accepts what the parser refuses, and accepts every canonical record whose id needs no escape")
    func agreesWithParser() {
        let seed = SeededGenerator.seed(for: "CanonicalScannerTests.agreesWithParser")
        var generator = RandomJSON(random: SeededGenerator(seed: seed))
        var accepted = 0
        var checked = 0
        for _ in 0..<20_000 {
            let text = Array(generator.object(depth: 0, top: true).utf8)
            var lines = [text]
            if let record = try? Record(parsing: text) { lines.append(record.body) }
            var mutated = lines.last!
            let position = Int(generator.random.next() % UInt64(mutated.count))
            switch generator.random.next() % 3 {
            case 0: mutated[position] = generator.pick(Array("{}[]\",:0-.e\\ a".utf8) + [0xC3, 0xFF, 0x80, 0x01])
            case 1: mutated.remove(at: position)
            default: mutated.insert(generator.pick(Array("{}[]\",:0-.e\\ a".utf8) + [0xC3, 0x80]), at: position)
            }
            lines.append(mutated)
            for line in lines {
                checked += 1
                let parser = parserVerdict(line)
                let scanner = scannerVerdict(line)
                let text = String(decoding: line, as: UTF8.self)
                if let scanner {
                    accepted += 1
                    #expect(
                        parser == scanner,
                        "scanner accepted \(text.debugDescription) with id \(scanner.debugDescription), parser says \(String(describing: parser)) (seed \(seed))"
                    )
                } else if let parser, !parser.utf8.contains(where: { $0 < 0x20 || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") }) {
                    Issue.record("scanner refused the canonical record \(text.debugDescription) (seed \(seed))")
                }
                if scanner != nil && parser != scanner { return }
            }
        }
        print("CanonicalScannerTests: \(checked) lines, \(accepted) accepted by the scanner (seed \(seed))")
        #expect(accepted > 1_000, "too few canonical lines generated to say anything (seed \(seed))")
    }

    @Test("depth and string limits are the parser's")
    func limits() {
        let deep = "{\"id\":\"a\",\"x\":" + String(repeating: "[", count: 63) + String(repeating: "]", count: 63) + "}"
        #expect(scannerVerdict(Array(deep.utf8)) == "a")
        let deeper = "{\"id\":\"a\",\"x\":" + String(repeating: "[", count: 64) + String(repeating: "]", count: 64) + "}"
        #expect(scannerVerdict(Array(deeper.utf8)) == nil)
        #expect(parserVerdict(Array(deeper.utf8)) == nil)
        let long = "{\"id\":\"a\",\"x\":\"" + String(repeating: "x", count: (1 << 20) + 1) + "\"}"
        #expect(scannerVerdict(Array(long.utf8)) == nil)
        #expect(parserVerdict(Array(long.utf8)) == nil)
        let longID = "{\"id\":\"" + String(repeating: "i", count: 513) + "\"}"
        #expect(scannerVerdict(Array(longID.utf8)) == nil)
    }
}

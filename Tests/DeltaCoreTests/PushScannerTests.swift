import DeltaTestSupport
import Foundation
import Testing

@testable import DeltaCore

/// The outcome of parsing a body, comparable: the request, or the error's words.
private func outcome(_ parse: () throws -> PushRequest) -> String {
    do { return String(describing: try parse()) } catch { return "error: \(error)" }
}

/// The public parser (fast path first) against the full parser alone, on the same bytes.
private func agree(_ body: [UInt8]) -> (same: Bool, fast: String, full: String) {
    let fast = outcome { try PushRequest(parsing: body) }
    let full = outcome { try PushRequest(fullyParsing: body) }
    return (fast == full, fast, full)
}

private func json(_ text: String) -> String { String(decoding: JSONValue.string(text).canonicalBytes, as: UTF8.self) }

private func scanned(_ body: [UInt8]) -> Bool {
    body.withUnsafeBufferPointer { PushScanner.scan($0) } != nil
}

/// Random pushes as clients write them: ids plain and odd, records canonical, bases real tags.
private struct RandomPush {
    var random: SeededGenerator

    mutating func pick<T>(_ items: [T]) -> T { items[Int(random.next() % UInt64(items.count))] }

    mutating func text() -> String {
        String((0..<(1 + random.next() % 8)).map { _ in pick(Array("abcXYZ09 /-_.é中😀\"\\\u{1}\u{7F}")) })
    }

    mutating func record(_ id: String) -> Record {
        var members = ["\"id\":\(json(id))"]
        for key in ["a", "b", "n", "z", "é"] where random.next() % 2 == 0 {
            members.append("\"\(key)\":" + pick(["1", "1.50", "-0.25", "1e3", "true", "null", "[1,{\"x\":[]}]", "{\"q\":\"\\u00e9\"}", json(text())]))
        }
        return try! Record(parsing: Array(("{" + members.shuffled(using: &random).joined(separator: ",") + "}").utf8))
    }

    mutating func push() -> PushRequest {
        let collection = try! CollectionName(pick(["notes", "items", "a-b_C9"]))
        let first = 1 + random.next() % 1_000
        let mutations = (0..<(1 + random.next() % 6)).map { offset -> Mutation in
            let id = random.next() % 4 == 0 ? text() : "rec\(random.next() % 100)"
            let base =
                random.next() % 5 == 0
                ? nil : Token(database: random.next(), position: random.next() % 1_000, commit: UInt32(truncatingIfNeeded: random.next())).entityTag
            if random.next() % 4 == 0 { return Mutation(id: first + UInt64(offset), collection: collection, delete: id, base: base) }
            return Mutation(id: first + UInt64(offset), collection: collection, put: record(id), base: base, create: random.next() % 3 == 0)
        }
        // A client id may not hold control characters: `edges` sends those.
        let client = random.next() % 5 == 0 ? String(text().filter { $0 != "\u{1}" && $0 != "\u{7F}" }) : "client-\(random.next() % 10)"
        return PushRequest(client: client.isEmpty ? "c" : client, mutations: mutations)
    }
}

@Suite("PushScanner: the push body's fast path agrees with the full parser")
struct PushScannerTests {
    @Test("pushes as clients write them take the fast path and parse to the same request")
    func writtenPushes() {
        let seed = SeededGenerator.seed(for: "PushScannerTests.writtenPushes")
        var generator = RandomPush(random: SeededGenerator(seed: seed))
        var fast = 0
        for _ in 0..<3_000 {
            let request = generator.push()
            let body = request.bytes
            let (same, fastOutcome, full) = agree(body)
            #expect(
                same,
                "fast path: \(fastOutcome)\nfull parser: \(full)\nbody: \(String(decoding: body, as: UTF8.self)) (seed \(seed), replay with DELTASNAP_SEED=\(seed))"
            )
            #expect(full == String(describing: request), "the full parser reads back another request (seed \(seed), replay with DELTASNAP_SEED=\(seed))")
            let plain =
                !request.client.utf8.contains { $0 == 0x22 || $0 == 0x5C || $0 < 0x20 || $0 == 0x7F }
                && request.mutations.allSatisfy { !$0.recordID.utf8.contains { $0 == 0x22 || $0 == 0x5C || $0 < 0x20 } }
            if plain {
                #expect(
                    scanned(body),
                    "a push written by PushRequest.bytes missed the fast path: \(String(decoding: body, as: UTF8.self)) (seed \(seed), replay with DELTASNAP_SEED=\(seed))"
                )
                fast += 1
            }
        }
        print("PushScannerTests: 3000 pushes, \(fast) with plain ids checked on the fast path (seed \(seed))")
        #expect(fast > 500, "too few plain pushes generated to say anything (seed \(seed), replay with DELTASNAP_SEED=\(seed))")
    }

    @Test("on altered bodies the fast path gives the full parser's answer, value or error")
    func alteredBodies() {
        let seed = SeededGenerator.seed(for: "PushScannerTests.alteredBodies")
        var generator = RandomPush(random: SeededGenerator(seed: seed))
        var accepted = 0
        for _ in 0..<6_000 {
            var body = generator.push().bytes
            for _ in 0..<(1 + generator.random.next() % 2) {
                let position = Int(generator.random.next() % UInt64(body.count))
                let byte = generator.pick(Array("{}[]\",:0123456789-.e\\ atn\u{7F}".utf8) + [0xC3, 0xFF, 0x80, 0x01])
                switch generator.random.next() % 3 {
                case 0: body[position] = byte
                case 1: body.remove(at: position)
                default: body.insert(byte, at: position)
                }
            }
            if scanned(body) { accepted += 1 }
            let (same, fast, full) = agree(body)
            #expect(
                same,
                "fast path: \(fast)\nfull parser: \(full)\nbody: \(String(decoding: body, as: UTF8.self).debugDescription) (seed \(seed), replay with DELTASNAP_SEED=\(seed))"
            )
            if !same { return }
        }
        print("PushScannerTests: 6000 altered bodies, \(accepted) still taken by the fast path (seed \(seed))")
        #expect(accepted > 100, "too few altered bodies on the fast path to say anything (seed \(seed), replay with DELTASNAP_SEED=\(seed))")
    }

    @Test("answers: all-applied ones take the fast path; every answer, altered or not, reads as the full parser reads it")
    func answers() {
        let seed = SeededGenerator.seed(for: "PushScannerTests.answers")
        var generator = RandomPush(random: SeededGenerator(seed: seed))
        var fast = 0
        for round in 0..<4_000 {
            let first = 1 + generator.random.next() % 100
            let results = (0..<(generator.random.next() % 5)).map { offset -> MutationResult in
                switch generator.random.next() % 8 {
                case 0:
                    return MutationResult(
                        id: first + offset, status: .conflict, reason: "changed", server: generator.record("r"),
                        base: Token(database: 1, position: 2, commit: 3).entityTag)
                case 1: return MutationResult(id: first + offset, status: .invalid, reason: "bad")
                case 2: return MutationResult(id: first + offset, status: .unchanged)
                default: return MutationResult(id: first + offset, status: .applied)
                }
            }
            let answer = PushResponse(lastMutationID: first + UInt64(max(results.count, 1)) - 1, results: results)
            var body = answer.json.canonicalBytes + (round % 2 == 0 ? Array("\n".utf8) : [])
            let written = body
            if round % 3 == 0 {
                let position = Int(generator.random.next() % UInt64(body.count))
                body[position] = generator.pick(Array("{}[]\",:0123456789 ad\n".utf8))
            }
            let scannedAnswer = body.withUnsafeBufferPointer { PushScanner.scanAnswer($0) }
            let full = try? PushResponse(fullyParsing: body)
            if let scannedAnswer {
                fast += 1
                #expect(
                    scannedAnswer == full,
                    "fast path \(scannedAnswer), full parser \(String(describing: full)): \(String(decoding: body, as: UTF8.self)) (seed \(seed), replay with DELTASNAP_SEED=\(seed))"
                )
            }
            if body == written {
                #expect(full == answer, "the full parser reads back another answer (seed \(seed), replay with DELTASNAP_SEED=\(seed))")
                if results.allSatisfy({ $0.status == .applied || $0.status == .unchanged }) {
                    #expect(
                        scannedAnswer == answer,
                        "an all-applied answer missed the fast path: \(String(decoding: body, as: UTF8.self)) (seed \(seed), replay with DELTASNAP_SEED=\(seed))"
                    )
                }
            }
        }
        print("PushScannerTests: 4000 answers, \(fast) on the fast path (seed \(seed))")
        #expect(fast > 500, "too few answers on the fast path to say anything (seed \(seed), replay with DELTASNAP_SEED=\(seed))")
    }

    @Test("edges the full parser decides: limits, flags, ids, names, client bytes")
    func edges() throws {
        let tag = json(Token(database: 0xAA, position: 3, commit: 11).entityTag)
        func body(
            client: String = "c", id: String = "1", collection: String = "notes", op: String = #""op":"put","record":{"id":"r"},"recordId":"r""#,
            flags: String = ""
        ) -> [UInt8] {
            Array(
                #"{"client":\#(client.hasPrefix("\"") ? client : "\"\(client)\""),"mutations":[{"base":\#(tag),"collection":"\#(collection)"\#(flags),"id":\#(id),\#(op)}]}"#
                    .utf8)
        }
        let nested = { (levels: Int) in
            #""op":"put","record":{"id":"r","x":"# + String(repeating: "[", count: levels) + String(repeating: "]", count: levels) + #"},"recordId":"r""#
        }
        let cases: [(String, [UInt8], Bool)] = [
            ("a plain put", body(), true),
            ("a delete", body(op: #""op":"delete","recordId":"r""#), true),
            ("a create", body(flags: #","create":true"#), true),
            ("a record nested as deep as the limit allows", body(op: nested(63)), true),
            ("a record nested one level deeper", body(op: nested(64)), false),
            ("create false, written out", body(flags: #","create":false"#), false),
            ("a create on a delete", body(op: #""op":"delete","recordId":"r""#, flags: #","create":true"#), false),
            ("a hidden member", body(op: #""op":"put","record":{"hidden":false,"id":"r"},"recordId":"r""#), false),
            ("a recordId that is not the record's", body(op: #""op":"put","record":{"id":"r"},"recordId":"s""#), false),
            ("a record out of order", body(op: #""op":"put","record":{"id":"r","a":1},"recordId":"r""#), false),
            ("id 0", body(id: "0"), false),
            ("id 2^53", body(id: "9007199254740992"), true),
            ("id 2^53 + 1", body(id: "9007199254740993"), false),
            ("id with a leading zero", body(id: "01"), false),
            ("id 1.0", body(id: "1.0"), false),
            ("a collection name with a dot", body(collection: "no.tes"), false),
            ("a client with DEL", body(client: "a\u{7F}b"), false),
            ("a client of 200 bytes", body(client: String(repeating: "c", count: 200)), true),
            ("a client of 201 bytes", body(client: String(repeating: "c", count: 201)), false),
            ("an empty client", body(client: ""), false),
            ("a client with an escape", body(client: #""a\"b""#), false),
        ]
        for (name, bytes, fast) in cases {
            #expect(scanned(bytes) == fast, "\(name): fast path \(scanned(bytes) ? "taken" : "not taken")")
            let (same, fastOutcome, full) = agree(bytes)
            #expect(same, "\(name): fast path \(fastOutcome), full parser \(full)")
        }
        #expect(!scanned(body() + Array("\n".utf8)), "a trailing newline goes to the full parser")
    }
}

import DeltaTestSupport
import Foundation
import HTTPTypes
import NIOCore
import NIOEmbedded
import NIOHTTP1
import Testing

@testable import DeltaServer

/// The raw request reader against NIO's HTTP/1 parser, on random and mutated request bytes:
/// whenever the raw path takes a request, NIO reads the same request from the same bytes (method,
/// target, version, keep-alive, the fields the raw path uses as the router gets them through
/// HTTPTypes, no body, and the next request starting where the raw path says this one ends);
/// otherwise the raw path hands the bytes over.
/// Request smuggling lives in such differences. The seed is printed; DELTASNAP_SEED replays it.
@Suite("The raw request reader reads what NIO's parser reads")
struct RawRequestFuzzTests {
    /// mulberry32: small, seeded, the same everywhere.
    struct Generator {
        var state: UInt32
        mutating func next() -> UInt32 {
            state &+= 0x6D2B_79F5
            var t = state
            t = (t ^ (t >> 15)) &* (t | 1)
            t ^= t &+ ((t ^ (t >> 7)) &* (t | 61))
            return t ^ (t >> 14)
        }
        mutating func below(_ n: Int) -> Int { Int(next() % UInt32(n)) }
        mutating func pick<T>(_ items: [T]) -> T { items[below(items.count)] }
    }

    private static let fieldPool = [
        "Host: x", "host:x", "If-None-Match: W/\"1-2-3\"", "if-none-match:\t\"abc\" ", "If-None-Match: *", "If-Modified-Since: Thu, 01 Jan 1970 00:00:07 GMT",
        "Accept-Encoding: gzip", "accept-encoding: gzip, br", "Authorization: Bearer a.b.c", "Connection: keep-alive", "Connection: close",
        "Connection: Keep-Alive, Upgrade", "Content-Length: 0", "Content-Length: 5", "Transfer-Encoding: chunked", "Transfer-Encoding : chunked",
        "Content-Length : 3", " Content-Length: 3", "X-Thing: a\u{7F}b", "X-Empty:", "Expect: 100-continue", "Upgrade: h2c", "Origin: http://a",
        "Delta-Client: app", "X-Long: " + String(repeating: "v", count: 300), "X-UTF8: caf\u{E9}", "If-None-Match: a, b", "Cookie: a=b",
    ]
    private static let targets = [
        "w", "items", "a.b-c_d", "w?since=1", "w%20x", "w/x", "", "w#f", "..", "w?a=b&c=d", "\u{E9}", "w?wait=5", "items?wait=30", "w?wait=",
        "w?wait=1234567", "w?wait=5&x=1", "w?wait=-1",
    ]
    private static let interesting: [UInt8] = [0x0D, 0x0A, 0x00, 0x20, 0x09, 0x3A, 0x7F, 0x80, 0xFF, 0x22, 0x2C, 0x61, 0x2F, 0x3F]

    /// A request: mostly well formed, sometimes mutated byte by byte.
    static func request(_ random: inout Generator) -> [UInt8] {
        var lines = ["\(random.below(3) == 0 ? "HEAD" : "GET") /api/\(random.pick(targets)) HTTP/1.1"]
        for _ in 0..<random.below(5) { lines.append(random.pick(fieldPool)) }
        if random.below(6) == 0, lines.count > 1 { lines.append(lines[1 + random.below(lines.count - 1)]) }
        var bytes = Array((lines.joined(separator: "\r\n") + "\r\n\r\n").utf8)
        for _ in 0..<(random.below(3) == 0 ? 0 : 1 + random.below(3)) {
            let at = random.below(bytes.count)
            switch random.below(4) {
            case 0: bytes.insert(random.pick(interesting), at: at)
            case 1: bytes.remove(at: at)
            case 2: bytes[at] = random.pick(interesting)
            default: bytes.insert(contentsOf: Array("\r\n \t".utf8).shuffled(using: &random).prefix(1 + random.below(3)), at: at)
            }
        }
        return bytes
    }

    /// What NIO's parser reads from `bytes`: its messages, or the error it stops at.
    static func nioReading(_ bytes: [UInt8]) -> (parts: [HTTPServerRequestPart], error: (any Error)?) {
        let channel = EmbeddedChannel(handler: ByteToMessageHandler(HTTPRequestDecoder(leftOverBytesStrategy: .forwardBytes)))
        var parts: [HTTPServerRequestPart] = []
        var failure: (any Error)?
        do {
            try channel.writeInbound(ByteBuffer(bytes: bytes))
        } catch {
            failure = error
        }
        while let part = try? channel.readInbound(as: HTTPServerRequestPart.self) { parts.append(part) }
        _ = try? channel.finish()
        return (parts, failure)
    }

    @Test("Random and mutated requests: the raw reader takes a request only when NIO reads the same one")
    func differential() throws {
        let seed = UInt32(truncatingIfNeeded: SeededGenerator.seed(for: "RawRequestFuzzTests.differential"))
        var random = Generator(state: seed)
        var taken = 0
        var asks = 0
        let follower = Array("GET /next HTTP/1.1\r\nHost: y\r\n\r\n".utf8)
        for round in 0..<20_000 {
            let bytes = Self.request(&random)
            guard case .request(let raw, let length) = bytes.withUnsafeBytes({ RawRequest.parse($0, limit: 8192) }) else { continue }
            taken += 1
            let context = "round \(round), seed \(seed): \(String(decoding: bytes, as: UTF8.self).debugDescription)"
            // The raw path's request, then another: NIO must read both, split where the raw path splits.
            let reading = Self.nioReading(Array(bytes[..<length]) + follower)
            #expect(reading.error == nil, "NIO refuses what the raw path took: \(context)")
            guard reading.parts.count == 4, case .head(let head) = reading.parts[0], case .end = reading.parts[1], case .head(let next) = reading.parts[2],
                case .end = reading.parts[3]
            else {
                Issue.record("NIO reads other messages (\(reading.parts.count) parts): \(context)")
                continue
            }
            #expect(head.method == (raw.isHead ? .HEAD : .GET) && head.version == .http1_1 && head.uri == "/api/" + raw.collection, "\(head): \(context)")
            #expect(head.isKeepAlive, "keep-alive: \(context)")
            #expect(next.uri == "/next", "the next request starts where the raw path says: \(context)")
            for (name, value) in [
                ("if-none-match", raw.ifNoneMatch), ("if-modified-since", raw.ifModifiedSince), ("accept-encoding", raw.acceptEncoding),
                ("authorization", raw.authorization),
            ] {
                // What the router reads: NIO's value made an `HTTPField` (white space around it dropped).
                let routed = head.headers[name].map { HTTPField(name: HTTPField.Name(name)!, value: $0).value }
                #expect(routed == (value.map { [$0] } ?? []), "\(name): \(context)")
            }
            for name in ["content-length", "transfer-encoding", "upgrade", "expect"] {
                #expect(head.headers[name].isEmpty, "\(name): \(context)")
            }
            #expect(raw.hasOrigin == (head.headers["origin"].count == 1), "origin: \(context)")
            // A waiting request asked again without its wait (`SharedAnswer`): every field as the router would get it.
            if let wait = raw.wait, let asked = bytes[..<length].withUnsafeBytes({ raw.withoutWait(headerBlock: $0) }) {
                asks += 1
                #expect(asked.path == "/api/" + wait.name && asked.method == (raw.isHead ? .head : .get), "\(asked): \(context)")
                #expect(asked.authority == head.headers["host"].first.map { HTTPField(name: .init("host")!, value: $0).value }, "host: \(context)")
                let routed = head.headers.filter { $0.name.lowercased() != "host" }.map { HTTPField(name: HTTPField.Name($0.name)!, value: $0.value) }
                #expect(Array(asked.headerFields) == routed, "fields: \(context)")
            }
        }
        print("RawRequestFuzzTests: the raw reader took \(taken) of 20,000 requests")
        #expect(taken > 2_000, "the generator makes plain requests too")
        print("RawRequestFuzzTests: \(asks) waiting requests asked again without their wait")
        #expect(asks > 200, "the generator makes waiting requests too")
    }
}

extension RawRequestFuzzTests.Generator: RandomNumberGenerator {
    mutating func next() -> UInt64 { UInt64(next() as UInt32) << 32 | UInt64(next() as UInt32) }
}

import DeltaCore
import DeltaServer
import DeltaStore
import DeltaTestSupport
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Testing

@Suite("Selections: exact deltas under random writes")
struct SelectionConvergenceTests {
    static let ids = (0..<40).map { String(format: "r%02d", $0) }
    static let colours: [JSONValue] = [.string("red"), .string("blue"), .string("Ünï"), .string("réd"), .null, .bool(true), .number("1")]
    /// Selections of several shapes: filter only, limit only, both, nested, negated.
    static let selections: [(filter: String?, limit: Int?)] = [
        (#"{"c":{"eq":"red"}}"#, nil),
        (#"{"v":{"gte":5}}"#, 5),
        (nil, 7),
        (#"{"or":[{"c":{"in":["red","Ünï"]}},{"v":{"exists":false}}]}"#, 4),
        (#"{"not":{"v":{"lt":3.0}}}"#, nil),
        (#"{"and":[{"v":{"gt":1e0}},{"v":{"lte":8}},{"c":{"ne":"blue"}}]}"#, 3),
    ]

    @Test(
        "Writers move records in and out of filters and across limits; every selection replica equals the filter applied to the server after every sync",
        arguments: Backend.available)
    func randomized(backend: Backend) async throws {
        let seed = SeededGenerator.seed(for: "SelectionConvergenceTests.randomized(\(backend))")
        try await withServer(.inProcess, backend: backend) { client, _ in
            var random = SeededGenerator(seed: seed)
            let log = CommitLog()
            var replicas = Self.selections.map { _ in ModelReplica() }
            var syncs = 0
            var notModified = 0
            var deltas = 0
            for step in 0..<120 {
                try await Self.write(client, &random, log: log, seed: seed, step: step)
                for index in replicas.indices where random.next() % 3 == 0 {
                    let outcome = try await Self.sync(client, &replicas[index], Self.selections[index], log: log, seed: seed, step: step)
                    syncs += 1
                    if outcome == 304 { notModified += 1 } else if outcome == 1 { deltas += 1 }
                }
            }
            for index in replicas.indices {
                _ = try await Self.sync(client, &replicas[index], Self.selections[index], log: log, seed: seed, step: 999)
                let again = try await Self.sync(client, &replicas[index], Self.selections[index], log: log, seed: seed, step: 1000)
                #expect(again == 304, "seed \(seed): selection \(index) synced twice with nothing written must get 304")
            }
            print(
                "SelectionConvergenceTests.randomized: seed \(seed): \(syncs) syncs of \(Self.selections.count) selections, \(deltas) deltas, \(notModified) 304s"
            )
            #expect(notModified > 0 && deltas > 0, "seed \(seed): the run exercised both deltas and 304s")
        }
    }

    /// One commit of 1 to 4 random records: new values, a colour that may be missing, hidden or shown again.
    static func write(_ client: some TestClientProtocol, _ random: inout SeededGenerator, log: CommitLog, seed: UInt64, step: Int) async throws {
        var items: [(id: String, hidden: Bool, body: String)] = []
        var seen = Set<String>()
        for _ in 0..<(Int(random.next() % 4) + 1) {
            let id = ids[Int(random.next() % UInt64(ids.count))]
            guard seen.insert(id).inserted else { continue }
            var members = [JSONMember(key: "id", value: .string(id))]
            if random.next() % 6 != 0 { members.append(JSONMember(key: "v", value: .number(String(random.next() % 10)))) }
            if random.next() % 5 != 0 { members.append(JSONMember(key: "c", value: colours[Int(random.next() % UInt64(colours.count))])) }
            let body = String(decoding: try Record(value: .object(members)).body, as: UTF8.self)
            items.append((id, random.next() % 5 == 0, body))
        }
        let json = "[" + items.map { $0.hidden ? "{\"hidden\":true," + $0.body.dropFirst() : $0.body }.joined(separator: ",") + "]"
        let response = try await client.write(.post, "/api/items", json)
        guard response.status == .ok else { throw TestFailure("seed \(seed) step \(step): write failed \(response.status): \(response.text)") }
        let summary = try JSONValue(parsing: response.bytes)
        if summary["committed"] == .bool(true), case .number(let position) = summary["position"] {
            await log.record(position: UInt64(position)!, changes: items)
        }
    }

    /// Syncs one selection replica and checks it against the server's state at the answer's
    /// token, filtered and cut at the limit; returns the status (1 for a delta, 2 for a full answer).
    static func sync(
        _ client: some TestClientProtocol, _ replica: inout ModelReplica, _ selection: (filter: String?, limit: Int?),
        log: CommitLog, seed: UInt64, step: Int
    ) async throws -> Int {
        var query: [String] = []
        if let filter = selection.filter { query.append("filter=" + filter.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!) }
        if let limit = selection.limit { query.append("limit=\(limit)") }
        var headers: HTTPFields = [:]
        if let etag = replica.etag { headers[.ifNoneMatch] = etag }
        let response = try await client.get("/api/items?" + query.joined(separator: "&"), headers).reply
        let held = replica.records
        let sent = replica.etag
        let label = "seed \(seed) step \(step) selection \(selection)"
        guard try replica.apply(response, sentETag: sent) else { throw TestFailure("\(label): unexpected reset: \(response.text)") }
        let position = try Token.position(lastModified: replica.lastModified ?? "")
        let expected = try Selection(filter: selection.filter, limit: selection.limit.map(String.init)).expectedState(of: await log.state(at: position))
        #expect(replica.records == expected, "\(label): the replica differs from the selection of the server state at position \(position)")
        #expect(
            response.header("Delta-Digest") == ModelReplica.digest(of: expected), "\(label): Delta-Digest is not the digest of the selection at \(position)")
        guard response.status == 200, response.header("Delta-Mode") == "delta" else { return response.status == 200 ? 2 : response.status }
        // Nothing needless on the wire: tombstones only for held records, each id once.
        let items = try ConvergenceTests.ids(in: response)
        #expect(items.count == Set(items).count, "\(label): a record appears twice in one delta")
        for item in try tombstones(in: response) {
            #expect(held[item] != nil, "\(label): a tombstone for \(item), which the replica never held")
        }
        return 1
    }

    static func tombstones(in response: HTTPReply) throws -> [String] {
        guard case .object(let members) = try JSONValue(parsing: response.bytes), case .array(let items) = members.first?.value else { return [] }
        return items.compactMap { item in
            guard item["hidden"] == .bool(true), case .string(let id) = item["id"] else { return nil }
            return id
        }
    }
}

import DeltaClient
import DeltaCore
import DeltaTestSupport
import Foundation
import Testing

@Suite("Real replicas with selections converge under random writes")
struct ReplicaSelectionConvergenceTests {
    static let selections: [Selection] = [
        try! Selection(filter: #"{"c":{"eq":"red"}}"#, limit: nil),
        try! Selection(filter: #"{"v":{"gte":5}}"#, limit: "6"),
        try! Selection(filter: nil, limit: "9"),
        try! Selection(filter: #"{"or":[{"c":{"in":["red","Ünï"]}},{"v":{"exists":false}}]}"#, limit: "5"),
    ]

    @Test(
        "four replicas with different selections sync at random between random edits; after every sync each equals its selection of the server, its queries and searches agree with its records, and its change notifications cover every row that changed"
    )
    func converge() async throws {
        let seed = SeededGenerator.seed(for: "ReplicaSelectionConvergenceTests")
        try await withHarness { harness in
            var random = SeededGenerator(seed: seed)
            let colours = [#""red""#, #""blue""#, #""Ünï""#, "null", "1"]
            func edit() -> String {
                var members = [#""id":"r\#(String(format: "%02d", random.next() % 30))""#]
                if random.next() % 6 != 0 { members.append(#""v":\#(random.next() % 10)"#) }
                if random.next() % 5 != 0 { members.append(#""c":\#(colours[Int(random.next() % UInt64(colours.count))])"#) }
                members.append(#""name":"word\#(random.next() % 7)""#)
                return "{" + members.joined(separator: ",") + "}"
            }
            try await harness.putMany(
                (0..<20).map { _ in edit() }.reduce(into: [String: String]()) { all, json in
                    all[String(json.dropFirst(7).prefix(3))] = json
                }.values.sorted())
            let snapshot = try await harness.bake("s0")
            var replicas: [Replica] = []
            for (index, selection) in Self.selections.enumerated() {
                var configuration = harness.configuration("client-\(index)", snapshot: snapshot)
                configuration.selections = [items: selection]
                configuration.searchable = [items: ["name"]]
                configuration.indexes = [items: ["c"]]
                replicas.append(try await Replica.open(configuration))
            }
            var syncs = 0
            var listed = 0
            for step in 0..<80 {
                let batch = (0..<Int(random.next() % 3 + 1)).map { _ in edit() }
                let unique = Dictionary(batch.map { (String($0.dropFirst(7).prefix(3)), $0) }, uniquingKeysWith: { $1 })
                if random.next() % 5 == 0, let id = unique.keys.first {
                    _ = try? await harness.hide(id)
                } else {
                    try await harness.putMany(unique.values.sorted())
                }
                for (index, replica) in replicas.enumerated() where random.next() % 2 == 0 {
                    let before = try await replica.contents()
                    let report = try await replica.sync()
                    syncs += 1
                    let after = try await replica.contents()
                    let label = "seed \(seed) step \(step) replica \(index)"
                    let expected = try ReplicaSelectionTests.expected(try await harness.serverRecords(), Self.selections[index])
                    #expect(after == expected, "\(label): differs from its selection of the server")
                    let changed = Set(before.keys).union(after.keys).filter { before[$0] != after[$0] }
                    let notified = try #require(report.collections.first?.changed)
                    if case .ids = notified { listed += 1 }
                    #expect(changed.allSatisfy { notified.contains($0) }, "\(label): rows changed without a notification: \(changed)")
                    let red = try Filter(parsing: #"{"c":{"eq":"red"}}"#)
                    await #expect(
                        Set(try replica.query(items, filter: red).map(\.id)) == Set(after.filter { red.matches(body: Array($0.value.utf8)) }.keys),
                        "\(label): indexed query")
                    let word = "word\(random.next() % 7)"
                    await #expect(
                        Set(try replica.search(word, in: items, limit: 100).map(\.id)) == Set(after.filter { $0.value.contains("\"\(word)\"") }.keys),
                        "\(label): search for \(word)")
                }
            }
            print("ReplicaSelectionConvergenceTests: seed \(seed): \(syncs) syncs, \(listed) with listed ids")
        }
    }
}

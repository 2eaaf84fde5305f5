import DeltaCore
import DeltaStore
import DeltaTestSupport
import Foundation
import Testing

@Suite("Push on the store: exactly once across instances")
struct PushTests {
    @Test("The same client's push sent at once through several instances applies each mutation once", arguments: Backend.available)
    func concurrentPushesApplyOnce(backend: Backend) async throws {
        let directory = URL(fileURLWithPath: try makeTemporaryDirectory("push"))
        defer { try? FileManager.default.removeItem(at: directory) }
        let database = try await backend.makeDatabase(in: directory)
        // PostgreSQL: three instances, as three servers would have; SQLite: one process, one instance.
        var instances: [any ChangeStore] = [try await database.open()]
        for _ in 1..<3 { instances.append(backend == .sqlite ? instances[0] : try await database.open()) }
        let stores = instances
        let notes = try CollectionName("notes")
        // 40 mutations of one record, each a new version: applied twice, one would take a second position.
        let mutations = try (1...40).map { index in
            Mutation(id: UInt64(index), collection: notes, put: try Record(parsing: Array(#"{"id":"r","v":\#(index)}"#.utf8)), base: nil)
        }
        let request = PushRequest(client: "app-1", mutations: mutations)
        let answers = try await withThrowingTaskGroup(of: PushResponse.self) { group in
            for round in 0..<6 {
                group.addTask { try await Push.apply(request, to: stores[round % stores.count]) }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(Set(answers.map { $0.json.canonicalBytes }).count == 1)
        #expect(answers.first?.lastMutationID == 40)
        #expect(answers.first?.results.allSatisfy { $0.status == .applied } == true)
        #expect(try await stores[0].headPosition() == 40)
        #expect(try await stores[0].record("r", in: notes)?.record.body == Array(#"{"id":"r","v":40}"#.utf8))
        #expect(try await stores[0].read(notes, since: .nothing, client: "app-1").lastMutation == 40)
        for store in Set(stores.map { ObjectIdentifier($0 as AnyObject) }).compactMap({ id in stores.first { ObjectIdentifier($0 as AnyObject) == id } }) {
            try await store.close()
        }
        await database.remove()
    }

    @Test("Groups: one commit per run of one collection, split where a record repeats")
    func grouping() throws {
        let a = try CollectionName("a")
        let b = try CollectionName("b")
        func put(_ id: UInt64, _ collection: CollectionName, _ record: String) throws -> Mutation {
            Mutation(id: id, collection: collection, put: try Record(parsing: Array(#"{"id":"\#(record)"}"#.utf8)), base: nil)
        }
        let mutations = try [put(1, a, "x"), put(2, a, "y"), put(3, a, "x"), put(4, b, "x"), put(5, b, "z"), put(6, a, "q")]
        #expect(Push.groups(mutations).map { $0.map(\.id) } == [[1, 2], [3], [4, 5], [6]])
    }
}

import DeltaCore
import DeltaStore
import DeltaTestSupport
import Foundation
import Testing

/// `StoreInspection`, what the operator's console reads, on both backends: collections' counts,
/// records page by page, a record's kept versions, and the push log newest first, a page at a time.
@Suite("The store as the console reads it: statistics, pages, history, the latest mutations")
struct StoreInspectionTests {
    static func record(_ json: String) throws -> Record { try Record(parsing: Array(json.utf8)) }

    @Test("Statistics count visible and hidden records and their bytes, and name each collection's last change", arguments: Backend.available)
    func statistics(backend: Backend) async throws {
        try await backend.withStore { store, _ in
            let notes = try CollectionName("notes")
            let tags = try CollectionName("tags")
            #expect(try await store.collectionStatistics().isEmpty)
            _ = try await store.write(to: notes) { transaction in
                for id in ["a", "b", "c"] { try await transaction.upsert(try Self.record(#"{"id":"\#(id)","text":"x"}"#)) }
            }
            _ = try await store.write(to: tags) { try await $0.upsert(try Self.record(#"{"id":"t"}"#)) }
            let hidden = try await store.write(to: notes) { try await $0.hide(id: "b") }.commit
            let statistics = try await store.collectionStatistics()
            #expect(statistics.map(\.name) == [notes, tags])
            let first = try #require(statistics.first)
            #expect(first.visible == 2 && first.hidden == 1)
            #expect(first.bytes == 3 * Int64(#"{"id":"a","text":"x"}"#.utf8.count))
            #expect(first.lastPosition == hidden.token.position)
            #expect(first.lastChange.map { abs($0.timeIntervalSinceNow) < 60 } == true)
            #expect(statistics.last?.visible == 1 && statistics.last?.lastPosition == 2)
        }
    }

    @Test("A page lists records in id order after the one given, hidden ones too, at most the limit", arguments: Backend.available)
    func pages(backend: Backend) async throws {
        try await backend.withStore { store, _ in
            let notes = try CollectionName("notes")
            _ = try await store.write(to: notes) { transaction in
                for id in ["d", "b", "a", "c", "e"] { try await transaction.upsert(try Self.record(#"{"id":"\#(id)"}"#)) }
            }
            _ = try await store.write(to: notes) { try await $0.hide(id: "c") }
            let first = try await store.recordPage(notes, after: nil, limit: 3, maximumBytes: 1 << 20)
            #expect(first.map(\.record.id) == ["a", "b", "c"])
            #expect(first.map(\.record.hidden) == [false, false, true])
            #expect(first.map(\.position) == [1, 1, 2])
            #expect(try await store.recordPage(notes, after: "c", limit: 3, maximumBytes: 1 << 20).map(\.record.id) == ["d", "e"])
            #expect(try await store.recordPage(notes, after: "e", limit: 3, maximumBytes: 1 << 20).isEmpty)
            // Bytes bound a page too: it ends before the record that would pass them, the first one always given.
            let small = #"{"id":"a"}"#.utf8.count
            #expect(try await store.recordPage(notes, after: nil, limit: 5, maximumBytes: 2 * small).map(\.record.id) == ["a", "b"])
            #expect(try await store.recordPage(notes, after: nil, limit: 5, maximumBytes: 0).map(\.record.id) == ["a"])
            #expect(try await store.recordPage(try CollectionName("none"), after: nil, limit: 3, maximumBytes: 1 << 20).isEmpty)
            // The records changed last, every collection's, newest first.
            _ = try await store.write(to: try CollectionName("tags")) { try await $0.upsert(try Self.record(#"{"id":"t"}"#)) }
            let changes = try await store.recentChanges(in: nil, before: nil, limit: 3)
            #expect(changes.map { "\($0.collection)/\($0.id)@\($0.position)" } == ["tags/t@3", "notes/c@2", "notes/e@1"])
            #expect(changes.map(\.hidden) == [false, true, false])
            #expect(try await store.recentChanges(in: notes, before: 2, limit: 2).map(\.id) == ["e", "d"])
        }
    }

    @Test("A record's history is its kept versions, newest first, the current one marked; compaction drops the old ones", arguments: Backend.available)
    func history(backend: Backend) async throws {
        try await backend.withStore { store, _ in
            let notes = try CollectionName("notes")
            for version in 1...3 {
                _ = try await store.write(to: notes) { try await $0.upsert(try Self.record(#"{"id":"n","v":\#(version)}"#)) }
            }
            _ = try await store.write(to: notes) { try await $0.hide(id: "n") }
            let versions = try await store.history(of: "n", in: notes, limit: 10, maximumBytes: 1 << 20)
            #expect(versions.map(\.position) == [4, 3, 2, 1])
            #expect(versions.map(\.current) == [true, false, false, false])
            #expect(versions.map(\.hidden) == [true, false, false, false])
            #expect(versions.map { String(decoding: $0.body, as: UTF8.self) }.last == #"{"id":"n","v":1}"#)
            #expect(versions.allSatisfy { $0.time != nil })
            #expect(try await store.history(of: "n", in: notes, limit: 2, maximumBytes: 1 << 20).map(\.position) == [4, 3])
            let version = #"{"id":"n","v":1}"#.utf8.count
            #expect(try await store.history(of: "n", in: notes, limit: 10, maximumBytes: 2 * version).map(\.position) == [4, 3])
            #expect(try await store.history(of: "n", in: notes, limit: 10, maximumBytes: 0).map(\.position) == [4])
            #expect(try await store.history(of: "missing", in: notes, limit: 10, maximumBytes: 1 << 20).isEmpty)
            _ = try await store.compact(before: 3, dropBaked: false, dryRun: false)
            #expect(try await store.historyHorizon() == 3)
            // The newest superseded version at or before the horizon stays: deltas from it stay exact.
            #expect(try await store.history(of: "n", in: notes, limit: 10, maximumBytes: 1 << 20).map(\.position) == [4, 3])
        }
    }

    @Test("The latest mutations: newest first, filtered, a page never splitting a commit, the next page going on from it", arguments: Backend.available)
    func recentMutations(backend: Backend) async throws {
        try await backend.withStore { store, _ in
            let notes = try CollectionName("notes")
            let tags = try CollectionName("tags")
            let writer = Principal.clientKey(rules: nil, writable: ["notes", "tags"])
            // Three pushes of two mutations each to notes (one commit each), from two clients, then one to tags.
            for (push, client, first) in [(1, "phone", UInt64(1)), (2, "tablet", 1), (3, "phone", 3)] {
                let mutations = [
                    Mutation(id: first, collection: notes, put: try Self.record(#"{"id":"n\#(push)"}"#), base: nil),
                    Mutation(id: first + 1, collection: notes, put: try Self.record(#"{"id":"m\#(push)"}"#), base: nil),
                ]
                let answer = try await Push.apply(PushRequest(client: client, mutations: mutations), to: store, as: writer)
                #expect(answer.results.allSatisfy { $0.status == .applied })
            }
            let tagged = [Mutation(id: 3, collection: tags, put: try Self.record(#"{"id":"t1"}"#), base: nil)]
            _ = try await Push.apply(PushRequest(client: "tablet", mutations: tagged), to: store, as: writer)
            let all = try await store.recentMutations(MutationQuery(limit: 100))
            #expect(all.mutations.map(\.id) == ["t1", "m3", "n3", "m2", "n2", "m1", "n1"])
            #expect(all.mutations.map(\.position) == [4, 3, 3, 2, 2, 1, 1])
            #expect(all.next == nil)
            // A limit of 3 ends where a commit ends, and the next page starts before that commit.
            let page = try await store.recentMutations(MutationQuery(limit: 3))
            #expect(page.mutations.map(\.id) == ["t1", "m3", "n3"])
            #expect(page.next == 3)
            let rest = try await store.recentMutations(MutationQuery(before: page.next, limit: 3))
            #expect(rest.mutations.map(\.id) == ["m2", "n2", "m1", "n1"], "the third row's commit is not split")
            #expect(rest.next == nil)
            #expect(try await store.recentMutations(MutationQuery(client: "tablet", limit: 10)).mutations.map(\.id) == ["t1", "m2", "n2"])
            #expect(try await store.recentMutations(MutationQuery(collection: tags, limit: 10)).mutations.map(\.id) == ["t1"])
            #expect(try await store.recentMutations(MutationQuery(user: "ada", limit: 10)).mutations.isEmpty)
        }
    }

    @Test("A page of mutations is cut only between commits, and goes on from the scan's floor when its filter matched little")
    func pageBuilder() throws {
        func logged(_ position: UInt64, _ id: String) -> LoggedMutation {
            LoggedMutation(position: position, time: 0, collection: "c", id: id, user: nil, client: "k", mutation: 1, operation: "put")
        }
        var page = MutationPage.Builder(limit: 2)
        let added = [page.add(logged(9, "a")), page.add(logged(9, "b")), page.add(logged(9, "c")), page.add(logged(8, "d"))]
        #expect(added == [true, true, true, false])
        #expect(page.page == MutationPage(mutations: [logged(9, "a"), logged(9, "b"), logged(9, "c")], next: 9))
        var sparse = MutationPage.Builder(limit: 5)
        let one = sparse.add(logged(7, "e"))
        #expect(one)
        sparse.floor = 4
        #expect(sparse.page == MutationPage(mutations: [logged(7, "e")], next: 4))
        sparse.floor = 0
        #expect(sparse.page.next == nil)
    }
}

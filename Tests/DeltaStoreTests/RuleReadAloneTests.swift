import DeltaCore
import DeltaStore
import DeltaTestSupport
import Foundation
import Testing

@Suite("A user's read of changes alone (openRuleChanges): the same answer, from one statement when it holds the whole read")
struct RuleReadAloneTests {
    /// The ids of the records changed after `since` and the feed's mode, read by `openRuleChanges`
    /// (`changesAlone`) or by `openRuleRead`.
    func changed(_ store: any ChangeStore, since: Token, changesAlone: Bool) async throws -> (ids: [String], mode: FeedMode) {
        let (start, _) =
            changesAlone
            ? try await store.openRuleChanges(name("w"), since: .token(since), client: nil)
            : try await store.openRuleRead(name("w"), since: .token(since), client: nil)
        guard case .source(let source, let mode) = start else { throw TestFailure("no source: \(start)") }
        defer { source.close() }
        var ids: [String] = []
        while let rows = try await source.changed(maximum: 100) { ids += rows.map(\.id) }
        return (ids, mode)
    }

    @Test(
        "Changes alone or not, a delta reads the same changed records, small or past what the first statement reads ahead; a source read alone refuses what it was promised not to be asked",
        arguments: Backend.available)
    func sameAnswer(backend: Backend) async throws {
        try await backend.withStore { store, _ in
            let first = try await put(store, "w", #"{"id":"a"}"#).token
            let few = try await put(store, "w", #"{"id":"a","v":2}"#, #"{"id":"b"}"#).token
            for changesAlone in [true, false] {
                let read = try await changed(store, since: first, changesAlone: changesAlone)
                #expect(read.ids == ["a", "b"] && read.mode == .delta(since: first.position), "changes alone \(changesAlone): \(read)")
                #expect(try await changed(store, since: few, changesAlone: changesAlone).ids.isEmpty)
            }
            // 300 changes: more than the first statement reads ahead (256), so the read begins
            // again in a transaction and goes on through a cursor.
            let many = try await store.write(to: name("w")) { transaction in
                for index in 0..<300 { try await transaction.upsert(try record(#"{"id":"m\#(1000 + index)"}"#)) }
            }.commit.token
            for changesAlone in [true, false] {
                let read = try await changed(store, since: few, changesAlone: changesAlone)
                #expect(read.ids.count == 300 && Set(read.ids).count == 300, "changes alone \(changesAlone): \(read.ids.count)")
            }
            // A source opened alone with everything read ahead has no transaction on PostgreSQL:
            // asked for a `$rows` source's rows, it throws rather than read another snapshot.
            try await put(store, "w", #"{"id":"c"}"#)
            let (start, _) = try await store.openRuleChanges(name("w"), since: .token(many), client: nil)
            guard case .source(let source, _) = start else { throw TestFailure("no source") }
            defer { source.close() }
            if backend == .postgres {
                await #expect(throws: StoreError.self) { try await source.forEachBody(of: name("w"), at: nil, key: nil) { _ in } }
            } else {
                try await source.forEachBody(of: name("w"), at: nil, key: nil) { _ in }  // SQLite always opens a transaction
            }
        }
    }
}

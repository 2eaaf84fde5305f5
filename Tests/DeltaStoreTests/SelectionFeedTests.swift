import DeltaCore
import DeltaStore
import DeltaTestSupport
import Foundation
import Testing

@Suite("SelectionFeed: an answer kept from the digest's pass, or computed again")
struct SelectionFeedTests {
    /// The body, the token and the digest of one selection answer.
    static func answer(_ store: any ChangeStore, _ selection: Selection, since: Since, keptBytes: Int) async throws -> (records: [String], token: Token?) {
        guard case .source(let source, let mode) = try await store.openSelectionRead(name("w"), since: since, client: nil).start else {
            throw TestFailure("no selection source")
        }
        let mark: SelectionMark? = if case .token(let token) = since { token.selection } else { nil }
        switch try await SelectionFeed.open(source, mode, selection: selection, mark: mark, keptBytes: keptBytes) {
        case .changes(let feed):
            defer { feed.close() }
            var records: [String] = []
            while let batch = try await feed.next(maximumBytes: 100) {
                batch.forEach { body, hidden in records.append((hidden ? "-" : "+") + String(decoding: body, as: UTF8.self)) }
            }
            #expect(feed.digest == feed.token.selection?.digest)
            return (records, feed.token)
        case .notModified(let token, _): return ([], token)
        case .rejected(let why): throw TestFailure("rejected: \(why)")
        }
    }

    @Test("The same records, token and digest whether the answer is kept or computed again, for full answers and deltas", arguments: Backend.available)
    func keptOrRecomputed(backend: Backend) async throws {
        try await backend.withStore { store, _ in
            _ = try await store.write(to: name("w")) { transaction in
                for index in 0..<60 { try await transaction.upsert(try Record(parsing: Array(#"{"id":"r\#(100 + index)","v":\#(index % 4)}"#.utf8))) }
            }
            let selection = try Selection(filter: #"{"v":{"gte":2}}"#, limit: "20")
            let kept = try await Self.answer(store, selection, since: .nothing, keptBytes: SelectionFeed.keptBytes)
            let again = try await Self.answer(store, selection, since: .nothing, keptBytes: 0)
            #expect(kept.records.count == 20)
            #expect(kept.records == again.records && kept.token == again.token)
            let token = try #require(kept.token)
            _ = try await store.write(to: name("w")) { transaction in
                for index in [0, 2, 3, 7, 50] {
                    try await transaction.upsert(try Record(parsing: Array(#"{"id":"r\#(100 + index)","v":\#(3 - index % 4)}"#.utf8)))
                }
                try await transaction.hide(id: "r111")
            }
            let keptDelta = try await Self.answer(store, selection, since: .token(token), keptBytes: SelectionFeed.keptBytes)
            let againDelta = try await Self.answer(store, selection, since: .token(token), keptBytes: 0)
            #expect(!keptDelta.records.isEmpty)
            #expect(keptDelta.records == againDelta.records && keptDelta.token == againDelta.token)
        }
    }
}

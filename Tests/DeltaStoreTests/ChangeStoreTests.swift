import DeltaCore
import DeltaSQLite
import DeltaStore
import DeltaTestSupport
import Foundation
import Testing

@Suite("ChangeStore, on every backend")
struct ChangeStoreTests {
    @Test("A full read returns the visible records sorted by id, with the collection's token", arguments: Backend.available)
    func full(backend: Backend) async throws {
        try await backend.withStore { store, _ in
            let first = try await put(store, "widgets", #"{"id":"b","n":2}"#, #"{"id":"a","n":1}"#, #"{"id":"c","hidden":true}"#)
            #expect(first.committed && first.upserted == 2 && first.hidden == 1)
            #expect(first.token.position == 1 && first.token.database == store.databaseID)
            let read = try await store.read(name("widgets"), since: .nothing).rows()
            #expect(read.rows == [Row(id: "a", hidden: false, body: #"{"id":"a","n":1}"#), Row(id: "b", hidden: false, body: #"{"id":"b","n":2}"#)])
            #expect(read.token == first.token)
            #expect(read.mode == .full)
        }
    }

    @Test("A delta holds exactly the records changed after the token, hidden ones included, in commit order", arguments: Backend.available)
    func delta(backend: Backend) async throws {
        try await backend.withStore { store, _ in
            let base = try await put(store, "widgets", #"{"id":"a","n":1}"#, #"{"id":"b","n":1}"#, #"{"id":"c","n":1}"#)
            try await put(store, "widgets", #"{"id":"c","n":2}"#)
            _ = try await store.write(to: name("widgets")) { try await $0.hide(id: "a") }
            try await put(store, "other", #"{"id":"x"}"#)
            let read = try await store.read(name("widgets"), since: .token(base.token)).rows()
            #expect(read.rows == [Row(id: "c", hidden: false, body: #"{"id":"c","n":2}"#), Row(id: "a", hidden: true, body: #"{"id":"a","n":1}"#)])
            #expect(read.token.position == 3)
            #expect(read.mode == .delta(since: 1))
            // The same from the Last-Modified form of the token.
            let byDate = try await store.read(name("widgets"), since: .position(base.token.position)).rows()
            #expect(byDate.rows == read.rows && byDate.token == read.token)
            // Bringing a record back is an upsert of a visible record.
            let back = try await put(store, "widgets", #"{"id":"a","n":1}"#)
            #expect(back.upserted == 1)
            let after = try await store.read(name("widgets"), since: .token(read.token)).rows()
            #expect(after.rows == [Row(id: "a", hidden: false, body: #"{"id":"a","n":1}"#)])
        }
    }

    @Test(
        "Deltas on both sides of what a backend reads ahead in one statement (256 records; 1 MiB of bodies) hold exactly the changed records, in position then id order, with the head's token",
        arguments: Backend.available)
    func deltasAroundReadAhead(backend: Backend) async throws {
        try await backend.withStore { store, _ in
            // 600 visible records, so that none of these deltas is switched to the full dataset.
            let ids = (0..<600).map { String(format: "r%03d", $0) }
            _ = try await store.write(to: name("w")) { transaction in for id in ids { try await transaction.upsert(try record(#"{"id":"\#(id)","v":0}"#)) } }
            let big = String(repeating: "x", count: 300_000)
            for (round, count, size) in [(1, 1, 0), (2, 255, 0), (3, 256, 0), (4, 257, 0), (5, 400, 0), (6, 3, 300_000), (7, 5, 300_000)] {
                let base = try await store.read(name("w"), since: .nothing).rows().token
                // Each round's changes in two commits, ids given in reverse so that id order is not write order; one in five hidden.
                let chosen = ids.shuffled().prefix(count)
                var expected: [Row] = []
                var commits: UInt64 = 0
                for part in [chosen.prefix(count / 2), chosen.dropFirst(count / 2)] where !part.isEmpty {
                    let bodies = part.sorted(by: >).map { id in
                        (id, #"{"id":"\#(id)","pad":"\#(big.prefix(size))","v":\#(round)}"#, id.hasSuffix("5"))
                    }
                    _ = try await store.write(to: name("w")) { transaction in
                        for (id, body, hidden) in bodies { try await transaction.upsert(Record(id: id, hidden: hidden, canonicalBody: Array(body.utf8))) }
                    }
                    commits += 1
                    expected += bodies.sorted { $0.0 < $1.0 }.map { Row(id: $0.0, hidden: $0.2, body: $0.1) }
                }
                let read = try await store.read(name("w"), since: .token(base)).rows()
                #expect(read.mode == .delta(since: base.position), "round \(round)")
                #expect(read.rows == expected, "round \(round): \(read.rows.count) records, expected \(expected.count)")
                #expect(read.token.position == base.position + commits, "round \(round)")
                // Unhide for the next round's count of visible records.
                for id in chosen where id.hasSuffix("5") { try await put(store, "w", #"{"id":"\#(id)","v":0}"#) }
            }
        }
    }

    @Test("Nothing changed in the collection means not modified, whatever other collections did", arguments: Backend.available)
    func notModified(backend: Backend) async throws {
        try await backend.withStore { store, _ in
            let token = try await put(store, "widgets", #"{"id":"a"}"#).token
            try await put(store, "other", #"{"id":"x"}"#)
            guard case .notModified(let current, _) = try await store.read(name("widgets"), since: .token(token)) else {
                Issue.record("expected not modified")
                return
            }
            #expect(current == token)
        }
    }

    @Test(
        "A delta that would carry more records than the collection has visible ones is answered with the full dataset; a smaller one stays a delta; selections are never switched",
        arguments: Backend.available)
    func largeDeltaAnsweredFull(backend: Backend) async throws {
        try await backend.withStore { store, _ in
            let token = try await put(store, "widgets", #"{"id":"a"}"#, #"{"id":"b"}"#, #"{"id":"c"}"#, #"{"id":"d"}"#).token
            try await put(store, "widgets", #"{"id":"a","n":1}"#)
            let small = try await store.read(name("widgets"), since: .token(token)).rows()
            #expect(small.mode == .delta(since: token.position) && small.rows.count == 1)
            _ = try await store.write(to: name("widgets")) { transaction in
                for id in ["b", "c", "d"] { try await transaction.hide(id: id) }
                try await transaction.upsert(try record(#"{"id":"e"}"#))
            }
            // 5 changed records (a, b, c, d, e) against 2 visible (a, e): the full dataset.
            let large = try await store.read(name("widgets"), since: .token(token)).rows()
            #expect(large.mode == .full)
            #expect(large.rows.map(\.id) == ["a", "e"] && large.rows.allSatisfy { !$0.hidden })
            guard case .source(let source, let mode) = try await store.openSelectionRead(name("widgets"), since: .token(token), client: nil).start else {
                throw TestFailure("no selection source")
            }
            source.close()
            #expect(mode == .delta(since: token.position))
        }
    }

    @Test("Writes that change nothing take no position", arguments: Backend.available)
    func unchangedWrites(backend: Backend) async throws {
        try await backend.withStore { store, _ in
            let first = try await put(store, "widgets", #"{"id":"a","x":[1,2]}"#)
            let again = try await put(store, "widgets", #"{ "x":[1.0, 2], "id":"a" }"#)
            #expect(!again.committed && again.unchanged == 1 && again.token == first.token)
            _ = try await store.write(to: name("widgets")) { try await $0.hide(id: "a") }
            let hideAgain = try await store.write(to: name("widgets")) { try await $0.hide(id: "a") }.commit
            #expect(!hideAgain.committed && hideAgain.unchanged == 1)
            #expect(try await store.headPosition() == 2)
        }
    }

    @Test("One commit is all or nothing: the same id twice fails and writes nothing", arguments: Backend.available)
    func atomic(backend: Backend) async throws {
        try await backend.withStore { store, _ in
            try await put(store, "widgets", #"{"id":"a","v":1}"#)
            await #expect(throws: StoreError.self) {
                try await put(store, "widgets", #"{"id":"a","v":2}"#, #"{"id":"b"}"#, #"{"id":"a","v":3}"#)
            }
            let rows = try await store.read(name("widgets"), since: .nothing).rows().rows
            #expect(rows == [Row(id: "a", hidden: false, body: #"{"id":"a","v":1}"#)])
            #expect(try await store.headPosition() == 1)
            do {
                _ = try await store.write(to: name("widgets")) { try await $0.hide(id: "nope") }
                Issue.record("hid a missing record")
            } catch let error as StoreError {
                #expect(error.kind == .notFound)
                #expect(error.description == #"record "nope" in widgets: does not exist"#)
            }
        }
    }

    @Test("Tokens the store cannot honour exactly are rejected, each with its reason", arguments: Backend.available)
    func rejections(backend: Backend) async throws {
        try await backend.withStore { store, _ in
            let token = try await put(store, "widgets", #"{"id":"a"}"#).token
            try await put(store, "widgets", #"{"id":"b"}"#)
            let foreign = Token(database: token.database &+ 1, position: 1, commit: token.commit)
            let ahead = Token(database: token.database, position: 3, commit: 1)
            let wrongCommit = Token(database: token.database, position: 1, commit: token.commit &+ 1)
            for (since, reason) in [
                (Since.token(foreign), TokenRejection.foreignDatabase), (.token(ahead), .ahead), (.token(wrongCommit), .unknownCommit),
                (.position(3), .ahead),
            ] {
                guard case .rejected(let rejection) = try await store.read(name("widgets"), since: since) else {
                    Issue.record("accepted \(since)")
                    continue
                }
                #expect(rejection == reason)
            }
            await #expect(throws: StoreError.self) { try await store.read(name("missing"), since: .nothing) }
        }
    }

    @Test(
        "hideUnwritten makes a write the complete new state: unwritten records are hidden, and more than one batch of writes is counted",
        arguments: Backend.available)
    func replace(backend: Backend) async throws {
        try await backend.withStore { store, _ in
            let ids = (0..<2_500).map { String(format: "r%04d", $0) }
            let first = try await store.write(to: name("items")) { transaction in
                for id in ids { try await transaction.upsert(try record(#"{"id":"\#(id)","v":1}"#)) }
            }.commit
            #expect(first.upserted == 2_500 && first.committed)
            // The new state: every even record unchanged, r0001 changed, a new one; the odd ones vanish.
            let kept = ids.enumerated().filter { $0.offset % 2 == 0 }.map(\.element)
            let second = try await store.write(to: name("items")) { transaction -> Int in
                for id in kept { try await transaction.upsert(try record(#"{"id":"\#(id)","v":1}"#)) }
                try await transaction.upsert(try record(#"{"id":"r0001","v":2}"#))
                try await transaction.upsert(try record(#"{"id":"new","v":1}"#))
                return try await transaction.hideUnwritten()
            }
            #expect(second.value == 1_249)
            #expect(second.commit.upserted == 2 && second.commit.hidden == 1_249 && second.commit.unchanged == 1_250)
            let delta = try await store.read(name("items"), since: .token(first.token)).rows()
            #expect(delta.rows.count == 1_251)
            #expect(delta.rows.filter(\.hidden).count == 1_249)
            #expect(delta.rows.first { $0.id == "r0001" } == Row(id: "r0001", hidden: false, body: #"{"id":"r0001","v":2}"#))
            let full = try await store.read(name("items"), since: .nothing).rows()
            #expect(full.rows.count == 1_252)
            // A second write of one id in one commit is refused, also across batches.
            do {
                _ = try await store.write(to: name("items")) { transaction in
                    for id in ids { try await transaction.upsert(try record(#"{"id":"\#(id)","v":3}"#)) }
                    try await transaction.upsert(try record(#"{"id":"r0002","v":4}"#))
                }
                Issue.record("wrote one id twice in one commit")
            } catch let error as StoreError {
                #expect(error.description == #"record "r0002" in items: written twice in one commit"#)
            }
            #expect(try await store.headPosition() == 2)
        }
    }
}

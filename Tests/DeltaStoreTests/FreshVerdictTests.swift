import DeltaCore
import DeltaSQLite
import DeltaStore
import DeltaTestSupport
import Foundation
import Testing

@Suite("304s are never stale: a read sees every commit that finished before it began")
struct FreshVerdictTests {
    static let readers = 6

    @Test(
        "While 6 readers keep asking with the current token (so shared verdict statements are always running), every read that begins after a commit returned sees that commit",
        arguments: Backend.available)
    func neverStale(backend: Backend) async throws {
        try await backend.withStore { store, _ in
            var token = try await put(store, "w", #"{"id":"a","n":0}"#).token
            let current = Locked(token)
            let stop = Locked(false)
            let load = Task {
                try await withThrowingTaskGroup(of: Int.self) { group in
                    for _ in 0..<Self.readers {
                        group.addTask {
                            var reads = 0
                            while !stop.withLock({ $0 }) {
                                let result = try await store.read(name("w"), since: .token(current.withLock { $0 }))
                                if case .changes(let feed) = result { feed.close() }
                                reads += 1
                                await Task.yield()
                            }
                            return reads
                        }
                    }
                    return try await group.reduce(0, +)
                }
            }
            var stale = 0
            for round in 1...40 {
                let before = token
                token = try await put(store, "w", #"{"id":"a","n":\#(round)}"#).token
                // The commit has returned: no read that starts now may call `before` current.
                try await withThrowingTaskGroup(of: Bool.self) { group in
                    for _ in 0..<8 {
                        group.addTask {
                            let result = try await store.read(name("w"), since: .token(before))
                            if case .changes(let feed) = result {
                                feed.close()
                                return false
                            }
                            return true
                        }
                    }
                    for try await notModified in group where notModified { stale += 1 }
                }
                current.withLock { $0 = token }
            }
            stop.withLock { $0 = true }
            let reads = try await load.value
            #expect(stale == 0, "\(stale) reads after a commit were told nothing changed")
            #expect(reads > 100, "the background load ran (\(reads) reads)")
        }
    }
}

extension FreshVerdictTests {
    @Test(
        "verdict() answers where read() would end, without records: the same token and mode, 304s and rejections alike, and a client's last mutation id",
        arguments: Backend.available)
    func verdictMatchesRead(backend: Backend) async throws {
        try await backend.withStore { store, _ in
            let first = try await put(store, "w", #"{"id":"a"}"#, #"{"id":"b"}"#).token
            let second = try await put(store, "w", #"{"id":"a","v":2}"#).token
            for since: Since in [.nothing, .token(first), .token(second), .token(Token(database: store.databaseID &+ 1, position: 1, commit: 1))] {
                let read = try await store.read(name("w"), since: since)
                let (verdict, last) = try await store.verdict(name("w"), since: since, client: nil)
                #expect(last == nil)
                switch (read, verdict) {
                case (.changes(let feed), .stream(let token, let mode, let digest)):
                    #expect(feed.token == token && feed.mode == mode && feed.digest == digest, "\(since)")
                    feed.close()
                case (.notModified(let a, let x), .answer(.notModified(let b, let y))): #expect(a == b && x == y, "\(since)")
                case (.rejected(let a), .answer(.rejected(let b))): #expect(a == b, "\(since)")
                default: Issue.record("\(since): read \(read), verdict \(verdict)")
                }
            }
            #expect(try await store.verdict(name("w"), since: .token(second), client: "someone").lastMutation == 0)
        }
    }
}

import DeltaCore
import DeltaStore
import DeltaTestSupport
import Foundation
import Testing

@Suite("State digests kept by the store")
struct DigestStoreTests {
    /// The digest a read returns, from a full read's feed.
    static func digest(_ store: any ChangeStore, _ collection: String) async throws -> StateDigest {
        guard case .changes(let feed) = try await store.read(name(collection), since: .nothing) else { throw TestFailure("no full read") }
        defer { feed.close() }
        return feed.digest
    }

    @Test(
        "Every write keeps the digest equal to the sum over the visible records: inserts, replacements, hides, un-hides, hides of the unwritten, unchanged writes",
        arguments: Backend.available)
    func everyWrite(backend: Backend) async throws {
        try await backend.withStore { store, _ in
            func expect(_ bodies: [String], _ step: String) async throws {
                #expect(try await Self.digest(store, "w") == StateDigest(bodies: bodies.map { Array($0.utf8) }), "\(step)")
            }
            try await put(store, "w", #"{"id":"a","n":1}"#, #"{"id":"b","n":2}"#)
            try await expect([#"{"id":"a","n":1}"#, #"{"id":"b","n":2}"#], "inserts")
            #expect(
                try await Self.digest(store, "w").hex == "a20bda701ad7a361dbd8454d0c4d8585fca6d60aebf5493b69b4ca84435e66ff",
                "the worked example of docs/PROTOCOL.md")
            try await put(store, "w", #"{"id":"b","n":3}"#, #"{"id":"a","n":1}"#)
            try await expect([#"{"id":"a","n":1}"#, #"{"id":"b","n":3}"#], "a replacement and an unchanged write")
            try await put(store, "other", #"{"id":"x"}"#)
            try await expect([#"{"id":"a","n":1}"#, #"{"id":"b","n":3}"#], "another collection's write")
            _ = try await store.write(to: name("w")) { try await $0.hide(id: "b") }
            try await expect([#"{"id":"a","n":1}"#], "a hide")
            try await put(store, "w", #"{"hidden":true,"id":"a","n":1}"#, #"{"id":"b","n":3}"#)
            try await expect([#"{"id":"b","n":3}"#], "written hidden, and un-hidden")
            try await put(store, "w", #"{"id":"c"}"#, #"{"id":"a","n":5}"#)
            _ = try await store.write(to: name("w")) { transaction in
                try await transaction.upsert(try Record(parsing: Array(#"{"id":"c"}"#.utf8)))
                try await transaction.hideUnwritten()
            }
            try await expect([#"{"id":"c"}"#], "hide the unwritten")
        }
    }

    @Test("A database from before digests were kept gets them computed once when opened", arguments: Backend.available)
    func migration(backend: Backend) async throws {
        let directory = URL(fileURLWithPath: try makeTemporaryDirectory("digest-migration"))
        defer { try? FileManager.default.removeItem(at: directory) }
        let database = try await backend.makeDatabase(in: directory)
        let store = try await database.open()
        try await put(store, "w", #"{"id":"a","n":1}"#, #"{"id":"b","n":2}"#, #"{"hidden":true,"id":"c"}"#)
        try await put(store, "v", #"{"id":"z"}"#)
        try await store.close()
        try await database.execute("DELETE FROM digests", "DELETE FROM meta WHERE key = 'digests_since'")
        let reopened = try await database.open()
        #expect(try await Self.digest(reopened, "w").hex == "a20bda701ad7a361dbd8454d0c4d8585fca6d60aebf5493b69b4ca84435e66ff")
        #expect(try await Self.digest(reopened, "v") == StateDigest(bodies: [Array(#"{"id":"z"}"#.utf8)]))
        try await reopened.close()
        await database.remove()
    }
}

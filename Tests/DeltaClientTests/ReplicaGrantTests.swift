import DeltaClient
import DeltaCore
import DeltaTestSupport
import Foundation
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

@Suite("Replica through users' cacheable reads: the 307's token is the user's, the answer everyone's")
struct ReplicaGrantTests {
    /// The server's count of `307`s to cacheable reads.
    static func redirects(_ harness: UserHarness) async throws -> Int {
        let url = URL(string: "http://127.0.0.1:\(harness.port)/metrics")!
        let (data, _) = try await URLSession.shared.data(from: url)
        let line = String(decoding: data, as: UTF8.self).split(separator: "\n").first { $0.hasPrefix("deltasnap_cacheable_redirects_total ") }
        return line.flatMap { Int($0.split(separator: " ").last ?? "") } ?? 0
    }

    @Test("A signed-in replica follows the 307 to its granted read, keeps its own token, and then gets 304s and deltas, never a reset")
    func followsGrants() async throws {
        try await withUserHarness(grants: true) { harness in
            try await harness.put("airports", #"{"id":"p1","name":"Paris"}"#)
            try await harness.put("notes", #"{"id":"a1","owner":"ada"}"#, #"{"id":"b1","owner":"bob"}"#)
            let snapshot = try await harness.bake()
            let replica = try await Replica.open(harness.configuration("ada", snapshot: snapshot) { try await UserHarness.token("ada") })
            _ = try await replica.sync()
            await #expect(try replica.records("notes") == ["a1": #"{"id":"a1","owner":"ada"}"#])
            let afterFirst = try await Self.redirects(harness)
            #expect(afterFirst >= 1, "the user's read was not sent to a granted read")

            let quiet = try await replica.sync()
            #expect(quiet.collections.first { $0.collection == "notes" }?.outcome == .notModified)
            try await harness.put("notes", #"{"id":"a1","owner":"ada","text":"edited"}"#, #"{"id":"a2","owner":"ada"}"#, #"{"id":"b2","owner":"bob"}"#)
            let changed = try await replica.sync()
            #expect(changed.collections.first { $0.collection == "notes" }?.outcome == .applied(upserted: 2, hidden: 0))
            #expect(try await Self.redirects(harness) > afterFirst, "the delta did not come through a granted read")
            await #expect(try replica.records("notes") == ["a1": #"{"id":"a1","owner":"ada","text":"edited"}"#, "a2": #"{"id":"a2","owner":"ada"}"#])
            #expect(try await replica.sync().collections.first { $0.collection == "notes" }?.outcome == .notModified)
        }
    }

    @Test("Sign-out right after a first sync through a granted read empties the user's notes and removes their eager blob; airports stay")
    func signOutAfterGrantedRead() async throws {
        try await withUserHarness(grants: true) { harness in
            try await harness.put("airports", #"{"id":"p1","name":"Paris"}"#)
            // Ada's note references a blob of hers, on the server.
            let mine = Data("ada's private photo".utf8)
            let photo = try await harness.uploadBlob(mine, type: "image/jpeg")
            try await harness.put("notes", #"{"id":"a1","owner":"ada","photo":"# + String(decoding: photo.json.canonicalBytes, as: UTF8.self) + "}")
            let snapshot = try await harness.bake()
            var configuration = harness.configuration("ada", snapshot: snapshot) { try await UserHarness.token("ada") }
            configuration.blobDownloads["notes"] = .eager
            let replica = try await Replica.open(configuration)
            _ = try await replica.sync()
            #expect(try await Self.redirects(harness) >= 1, "the user's read was not sent to a granted read")
            await #expect(try replica.records("notes").keys.sorted() == ["a1"])
            let file = configuration.storeURL.path + "-blobs/\(photo.hash.hex)"
            #expect(FileManager.default.fileExists(atPath: file), "downloaded with the sync")

            try await replica.signOut()
            await #expect(try replica.records("notes").isEmpty, "the granted read's rows are the user's")
            await #expect(try replica.records("airports").keys.sorted() == ["p1"])
            #expect(!FileManager.default.fileExists(atPath: file), "the user's row's blob went with it")
            // The next user, offline (no credentials), sees none of Ada's rows.
            var offline = configuration
            offline.credentials = nil
            let next = try await Replica.open(offline)
            await #expect(try next.records("notes").isEmpty)
        }
    }
}

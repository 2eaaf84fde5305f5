import DeltaClient
import DeltaCore
import DeltaSQLite
import DeltaTestSupport
import Foundation
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

@Suite("Replica with a signed-in user: blobs")
struct ReplicaUserBlobTests {
    @Test("A blob upload and a blob download each refresh an expired token once, as pushes and pulls do")
    func blobsRefreshExpiredTokens() async throws {
        try await withUserHarness { harness in
            try await harness.put("airports", #"{"id":"p1","name":"Paris"}"#)
            try await harness.put("notes", #"{"id":"b1","owner":"bob"}"#)
            let snapshot = try await harness.bake()
            let asked = Locked(0)
            let writer = try await Replica.open(harness.configuration("ada-phone", snapshot: snapshot, credentials: UserHarness.expiredFirst("ada", asked)))
            let photo = try await writer.attach(Data("ada's photo".utf8), type: "image/jpeg")
            let note = Array(#"{"id":"n2","owner":"ada","photo":"#.utf8) + photo.json.canonicalBytes + Array("}".utf8)
            try await writer.put(try Record(parsing: note), in: "notes")
            // The sync's first request is the blob's upload, with the expired token.
            let report = try await writer.sync()
            #expect(report.pushed.applied == 1)
            #expect(asked.withLock { $0 } == 2, "the expired token, then one fresh after the upload's 401 token-expired")

            let readerAsked = Locked(0)
            let reader = try await Replica.open(
                harness.configuration("ada-tablet", snapshot: snapshot, credentials: UserHarness.expiredFirst("ada", readerAsked)))
            #expect(try Data(contentsOf: try await reader.blob(photo)) == Data("ada's photo".utf8))
            #expect(readerAsked.withLock { $0 } == 2, "the expired token, then one fresh after the download's 401 token-expired")
        }
    }

    @Test("Sign-out removes the blobs of the user's rows and their pending writes; the bundled blob of a public row stays")
    func signOutBlobs() async throws {
        try await withUserHarness { harness in
            let bundled = Array("the airport's photo".utf8)
            let bundledReference = BlobReference(hash: BlobHash.of(bundled), size: Int64(bundled.count), type: "image/jpeg")
            try await harness.put("airports", #"{"id":"p1","photo":"# + String(decoding: bundledReference.json.canonicalBytes, as: UTF8.self) + "}")
            // Ada's note references a blob of hers, on the server.
            let mine = Data("ada's private photo".utf8)
            let privatePhoto = try await harness.uploadBlob(mine, type: "image/jpeg")
            try await harness.put("notes", #"{"id":"a1","owner":"ada","photo":"# + String(decoding: privatePhoto.json.canonicalBytes, as: UTF8.self) + "}")
            let snapshot = try await harness.bake(blobs: [bundledReference.hash: bundled])
            let configuration = harness.configuration("ada", snapshot: snapshot) { try await UserHarness.token("ada") }
            let replica = try await Replica.open(configuration)
            let directory = configuration.storeURL.path + "-blobs"
            #expect(FileManager.default.contents(atPath: "\(directory)/\(bundledReference.hash.hex)") == Data(bundled), "installed from the snapshot")
            _ = try await replica.sync()
            #expect(try Data(contentsOf: try await replica.blob(privatePhoto)) == mine)
            let draft = try await replica.attach(Data("a draft's photo".utf8), type: "image/jpeg")
            try await replica.signOut(discardingPendingWrites: true)
            #expect(!FileManager.default.fileExists(atPath: "\(directory)/\(privatePhoto.hash.hex)"), "the user's row's blob went with it")
            #expect(!FileManager.default.fileExists(atPath: "\(directory)/\(draft.hash.hex)"), "the discarded write's blob went with it")
            #expect(FileManager.default.contents(atPath: "\(directory)/\(bundledReference.hash.hex)") == Data(bundled), "the public, bundled one stays")
        }
    }
}

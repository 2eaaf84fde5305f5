import DeltaCore
import DeltaSQLiteStore
import DeltaStore
import DeltaTestSupport
import Foundation
import Testing

@Suite("Blobs and compaction, and who may reference a blob")
struct BlobCompactionTests {
    static func upload(_ store: any ChangeStore, _ text: String, uploader: String? = nil) async throws -> StoredBlob {
        let bytes = Array(text.utf8)
        let upload = try await store.beginUpload(BlobHash.of(bytes), type: "text/plain", maximumBytes: 1 << 20, uploader: uploader)
        try await upload.write(bytes)
        return try await upload.finish()
    }

    static func write(_ store: any ChangeStore, _ json: String, hidden: Bool = false) async throws {
        var record = try Record(parsing: Array(json.utf8))
        record.hidden = hidden
        _ = try await store.write(to: try CollectionName("notes")) { try await $0.upsert(record) }
    }

    static func reference(_ blob: StoredBlob) -> String { #"{"$blob":"\#(blob.hash.hex)","size":\#(blob.size),"type":"text/plain"}"# }

    @Test(
        "Compaction drops the blobs stored before its horizon that no row references, a tombstone's only once the tombstone goes; a dry run drops none",
        arguments: Backend.available)
    func compaction(backend: Backend) async throws {
        try await backend.withStore { store, _ in
            let dropped = try await Self.upload(store, "only a hidden note references me")
            let never = try await Self.upload(store, "nobody references me")
            let kept = try await Self.upload(store, "a visible note references me")
            try await Self.write(store, #"{"id":"x","f":\#(Self.reference(dropped))}"#)
            try await Self.write(store, #"{"id":"y","f":\#(Self.reference(kept))}"#)
            try await Self.write(store, #"{"id":"x","f":\#(Self.reference(dropped))}"#, hidden: true)
            try await Self.write(store, #"{"id":"z"}"#)
            let head = try await store.headPosition()
            // Uploaded after the last commit: after any horizon there can be now.
            let late = try await Self.upload(store, "uploaded after the horizon")

            let dry = try await store.compact(before: head, dropBaked: false, dryRun: true)
            #expect(dry.droppedBlobs == 2 && dry.droppedBlobBytes == dropped.size + never.size)
            #expect(try await store.blob(dropped.hash) == dropped)

            let report = try await store.compact(before: head, dropBaked: false, dryRun: false)
            #expect(report.droppedHidden == 1)
            #expect(report.droppedBlobs == 2 && report.droppedBlobBytes == dropped.size + never.size)
            for gone in [dropped, never] {
                #expect(try await store.blob(gone.hash) == nil)
                #expect(try await store.openBlob(gone.hash, range: 0..<10) == nil)
            }
            #expect(try await store.blob(kept.hash) == kept)
            #expect(try await store.blob(late.hash) == late)
            if let sqlite = store as? SQLiteStore {
                let folder = sqlite.blobDirectory
                #expect(!FileManager.default.fileExists(atPath: "\(folder)/\(dropped.hash.hex.prefix(2))/\(dropped.hash.hex)"))
                #expect(FileManager.default.fileExists(atPath: "\(folder)/\(kept.hash.hex.prefix(2))/\(kept.hash.hex)"))
            }
            let totals = try await store.blobTotals()
            #expect(totals.blobs == 2 && totals.bytes == kept.size + late.size)
            // A dropped blob uploaded again is a blob again.
            #expect(try await Self.upload(store, "nobody references me") == never)
        }
    }

    @Test("A user may reference a blob they uploaded; another user, knowing only the hash, may not; the owner may", arguments: Backend.available)
    func uploaders(backend: Backend) async throws {
        try await backend.withStore { store, _ in
            let photo = try await Self.upload(store, "ada's photo", uploader: "ada")
            let (ada, bob, owner) = try await store.write(to: try CollectionName("notes")) { transaction in
                (
                    try await transaction.heldBlobs([photo.hash], uploadedBy: "ada"), try await transaction.heldBlobs([photo.hash], uploadedBy: "bob"),
                    try await transaction.heldBlobs([photo.hash], uploadedBy: nil)
                )
            }.value
            #expect(ada == [photo.hash] && bob.isEmpty && owner == [photo.hash])
            // Bob editing a record that already references it keeps the reference.
            let record = try Record(parsing: Array(#"{"id":"n","f":\#(Self.reference(photo))}"#.utf8))
            let (fresh, edited) = try await store.write(to: try CollectionName("notes")) { transaction in
                (
                    try await transaction.blobRefusal(record, user: "bob", previous: nil),
                    try await transaction.blobRefusal(record, user: "bob", previous: record)
                )
            }.value
            #expect(fresh == .missing([photo.hash]))
            #expect(edited == nil)
            // Once Bob uploads the bytes too, he may.
            _ = try await Self.upload(store, "ada's photo", uploader: "bob")
            let after = try await store.write(to: try CollectionName("notes")) { try await $0.blobRefusal(record, user: "bob") }.value
            #expect(after == nil)
        }
    }
}

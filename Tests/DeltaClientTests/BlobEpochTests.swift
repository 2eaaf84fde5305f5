import DeltaCore
import Foundation
import Testing

@testable import DeltaClient

@Suite("A download that began before a sign-out never leaves the signed-out user's blob behind")
struct BlobEpochTests {
    @Test("A download's file is refused once a sign-out ran since the download began; one that begins after the sign-out keeps its blob")
    func signOutDuringDownload() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("blob-epoch-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let blobs = ReplicaBlobs(storeURL: directory.appendingPathComponent("replica.sqlite"))
        let bytes = Data("the signed-out user's photo".utf8)
        let partial = blobs.directory.appendingPathComponent("partial/download")
        try blobs.make("partial")
        try bytes.write(to: partial)
        let (hash, _) = try ReplicaBlobs.digest(of: partial)
        let began = blobs.epoch()

        // The sign-out removes every blob and partial file; the download, still running, then
        // finishes its file (the race: its last piece landed after the removal).
        try blobs.removeAll(keeping: [])
        try blobs.make("partial")
        try bytes.write(to: partial)
        #expect(throws: CancellationError.self) { try blobs.adopt(partial, as: hash, epoch: began) }
        #expect(!blobs.holds(hash))
        #expect(!FileManager.default.fileExists(atPath: partial.path))

        // A download that begins after the sign-out is the next user's: it keeps its blob.
        let now = blobs.epoch()
        #expect(now != began)
        try bytes.write(to: partial)
        try blobs.adopt(partial, as: hash, epoch: now)
        #expect(blobs.holds(hash))
    }

    @Test("A download that began before the first blob existed (no directory, no epoch yet) is refused after a sign-out too")
    func signOutBeforeTheDirectoryExists() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("blob-epoch-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let blobs = ReplicaBlobs(storeURL: directory.appendingPathComponent("replica.sqlite"))
        let began = blobs.epoch()
        try blobs.removeAll(keeping: [])
        // The download goes on: it makes the directory and finishes its file.
        let bytes = Data("a photo fetched with the signed-out user's token".utf8)
        try blobs.make("partial")
        let partial = blobs.directory.appendingPathComponent("partial/download")
        try bytes.write(to: partial)
        let (hash, _) = try ReplicaBlobs.digest(of: partial)
        #expect(throws: CancellationError.self) { try blobs.adopt(partial, as: hash, epoch: began) }
        #expect(!blobs.holds(hash))
    }
}

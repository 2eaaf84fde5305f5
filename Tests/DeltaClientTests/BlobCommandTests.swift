import DeltaClient
import DeltaCore
import DeltaSQLiteStore
import DeltaStore
import DeltaTestSupport
import Foundation
import Testing

@Suite("deltasnap put --attach and deltasnap blob as real processes")
struct BlobCommandTests {
    @Test("put --attach queues the record with its file's reference; sync uploads the file first; blob writes it from the replica or the server")
    func attachAndFetch() async throws {
        try await withHarness { harness in
            try await harness.put(#"{"id":"seed"}"#)
            let snapshot = try await harness.bake("v1")
            let store = harness.directory.appendingPathComponent("cli.sqlite").path
            let sync = ["sync", "--store", store, "--snapshot", snapshot.path, "--url", harness.apiURL().absoluteString, "--client-key", appKey]
            var (status, printed) = try await runDeltasnap(sync)
            #expect(status == 0)
            let photo = harness.directory.appendingPathComponent("cat.jpg")
            let bytes = Data((0..<50_000).map { UInt8(truncatingIfNeeded: $0 &* 31) })
            try bytes.write(to: photo)
            let hash = BlobHash.of(Array(bytes))
            (status, printed) = try await runDeltasnap(
                ["put", "--store", store, "--collection", items, "--attach", "photo=\(photo.path)"], input: #"{"id":"p1"}"#)
            #expect(status == 0, "\(printed)")
            #expect(printed == "\(photo.path): attached as \(hash) (50000 bytes, image/jpeg)\nitems/p1: pending\n")
            (status, printed) = try await runDeltasnap(["dump", "--store", store, "--collection", items])
            #expect(printed.contains(#"{"id":"p1","photo":{"$blob":"\#(hash)","size":50000,"type":"image/jpeg"}}"#), "\(printed)")
            (status, printed) = try await runDeltasnap(sync)
            #expect(status == 0 && printed.contains("pushed: 1 applied"), "\(printed)")
            #expect(try await harness.store.blob(hash)?.size == 50_000)

            let mine = harness.directory.appendingPathComponent("mine.jpg").path
            // A copy killed mid-write left its temporary file (a process id no process has); a
            // running one's (this process's) is left alone.
            let abandoned = harness.directory.appendingPathComponent(".mine.jpg.tmp-2147483646").path
            let running = harness.directory.appendingPathComponent(".mine.jpg.tmp-\(getpid())").path
            for path in [abandoned, running] { #expect(FileManager.default.createFile(atPath: path, contents: Data("half".utf8))) }
            (status, printed) = try await runDeltasnap(["blob", "--store", store, hash.hex, "--out", mine])
            #expect(status == 0 && printed == "\(mine): the replica's copy of \(hash)\n", "\(printed)")
            #expect(FileManager.default.contents(atPath: mine) == bytes)
            #expect(!FileManager.default.fileExists(atPath: abandoned) && FileManager.default.fileExists(atPath: running))
            // Another replica does not hold it: it downloads it from the server it synced with (a
            // store that never synced needs --url), with the client key from a file-less option.
            let other = harness.directory.appendingPathComponent("other.sqlite").path
            let theirs = harness.directory.appendingPathComponent("theirs.jpg").path
            let fresh = harness.directory.appendingPathComponent("fresh.sqlite").path
            (status, _) = try await runDeltasnap(["sync", "--store", fresh, "--snapshot", snapshot.path, "--url", "http://127.0.0.1:9/api"])
            (status, printed) = try await runDeltasnap(["blob", "--store", fresh, hash.hex, "--out", theirs])
            #expect(status != 0 && printed.contains("the store never synced with a server (give --url"), "\(printed)")
            (status, _) = try await runDeltasnap(["sync", "--store", other, "--snapshot", snapshot.path, "--url", harness.apiURL().absoluteString])
            (status, printed) = try await runDeltasnap(["blob", "--store", other, hash.hex, "--out", theirs, "--client-key", appKey])
            #expect(status == 0 && printed == "\(theirs): downloaded \(hash)\n", "\(printed)")
            #expect(FileManager.default.contents(atPath: theirs) == bytes)
            // --token and --token-file exclude each other; the help has no stray backslashes.
            (status, printed) = try await runDeltasnap(["blob", "--store", other, hash.hex, "--out", theirs, "--token", "a", "--token-file", "b"])
            #expect(status != 0 && printed.contains("give --token or --token-file, not both"), "\(printed)")
            (status, printed) = try await runDeltasnap(["blob", "--help"])
            #expect(status == 0 && printed.contains("--token-file <file>") && !printed.contains("\\\n"), "\(printed)")
            // One the server does not give, and bad input: clear errors, no file.
            let absent = BlobHash.of(Array("absent".utf8))
            (status, printed) = try await runDeltasnap(["blob", "--store", other, absent.hex, "--out", theirs + "2", "--url", harness.apiURL().absoluteString])
            #expect(status != 0 && printed.contains("the server answered 404"), "\(printed)")
            #expect(!FileManager.default.fileExists(atPath: theirs + "2"))
            (status, printed) = try await runDeltasnap(["blob", "--store", other, "ABC", "--out", theirs + "2"])
            #expect(status != 0 && printed.contains("64 lowercase hexadecimal digits"), "\(printed)")
            (status, printed) = try await runDeltasnap(
                ["put", "--store", store, "--collection", items, "--attach", "id=\(photo.path)"], input: #"{"id":"p2"}"#)
            #expect(status != 0 && printed.contains("expected MEMBER=FILE with a member other than id"), "\(printed)")
        }
    }
}

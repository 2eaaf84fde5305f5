import DeltaClient
import DeltaCore
import DeltaSQLite
import DeltaServer
import DeltaTestSupport
import Foundation
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Runs `deltasnap` to its end and returns its exit code and what it printed.
func runDeltasnap(_ arguments: [String]) async throws -> (Int32, String) {
    let process = try ChildProcess(try deltasnapExecutable(), arguments)
    let status = await process.stop(0, timeout: .seconds(60))
    return (status, process.printed)
}

@Suite("deltasnap sync and dump as real processes")
struct SyncCommandTests {
    @Test("sync installs, applies and says so in text and JSON; dump prints canonical NDJSON sorted by id")
    func syncAndDump() async throws {
        try await withHarness { harness in
            try await harness.put(#"{"id":"b","n":2}"#, #"{"id":"a","n":1}"#)
            let snapshot = try await harness.bake("v1")
            let store = harness.directory.appendingPathComponent("cli.sqlite").path
            let common = ["--store", store, "--snapshot", snapshot.path, "--url", harness.apiURL().absoluteString]
            var (status, printed) = try await runDeltasnap(["sync"] + common)
            let tag = try SnapshotManifestProbe.entityTag(snapshot)
            #expect(status == 0)
            #expect(printed == "installed from the snapshot: items\nitems: not modified (ETag \(tag))\n")
            try await harness.put(#"{"id":"c","n":3}"#)
            try await harness.hide("a")
            (status, printed) = try await runDeltasnap(["sync", "--json"] + common)
            #expect(status == 0)
            let etag = try #require(try await harness.serverETag())
            let escaped = etag.replacingOccurrences(of: "\"", with: "\\\"")
            #expect(
                printed
                    == #"{"collections":[{"etag":"\#(escaped)","hidden":1,"name":"items","outcome":"applied","reset":null,"upserted":1}],"installed":[],"pushed":{"applied":0,"conflicts":[],"error":null,"unchanged":0},"rebuilt":null}"#
                    + "\n")
            (status, printed) = try await runDeltasnap(["dump", "--store", store, "--collection", "items"])
            #expect(status == 0)
            #expect(printed == "{\"id\":\"b\",\"n\":2}\n{\"id\":\"c\",\"n\":3}\n")
            // Once the processes ended, the logs are kept: a full disk can still open the store.
            for log in [store + "-wal", store + "-shm", store + "-outbox-wal", store + "-outbox-shm"] {
                #expect(FileManager.default.fileExists(atPath: log), "\(log)")
            }
        }
    }

    @Test("no server: exit 75 with the reason on stderr, the store untouched")
    func networkDownExitCode() async throws {
        try await withHarness { harness in
            try await harness.put(#"{"id":"a"}"#)
            let snapshot = try await harness.bake("v1")
            let store = harness.directory.appendingPathComponent("cli.sqlite").path
            let url = "http://127.0.0.1:9/api"  // discard: nothing listens there
            let (status, printed) = try await runDeltasnap(["sync", "--store", store, "--snapshot", snapshot.path, "--url", url])
            #expect(status == 75)
            #expect(printed.hasPrefix("deltasnap sync: network: no answer from the server (\(url)/items: "))
            let (_, dumped) = try await runDeltasnap(["dump", "--store", store, "--collection", "items"])
            #expect(dumped == "{\"id\":\"a\"}\n")
            let (missing, message) = try await runDeltasnap([
                "dump", "--store", harness.directory.appendingPathComponent("none.sqlite").path, "--collection", "items",
            ])
            #expect(missing == 1)
            #expect(message.contains("none.sqlite: no such replica store"))
        }
    }

    @Test("after failures, sync backs off and says why and how to go on; --force syncs now; a failure for good names no retry time")
    func forceAfterBackoff() async throws {
        try await withHarness { harness in
            try await harness.put(#"{"id":"a"}"#)
            let snapshot = try await harness.bake("v1")
            let store = harness.directory.appendingPathComponent("cli.sqlite").path
            // The server answers 503 with Retry-After: 120 once: a back-off of two minutes, longer
            // than this test takes however slow the machine.
            harness.proxy.plan(.status(503, retryAfter: "120"))
            let unavailable = ["sync", "--store", store, "--snapshot", snapshot.path, "--url", harness.apiURL(viaProxy: true).absoluteString]
            #expect(try await runDeltasnap(unavailable).0 == 75)
            let live = ["sync", "--store", store, "--snapshot", snapshot.path, "--url", harness.apiURL().absoluteString]
            var (status, printed) = try await runDeltasnap(live)
            #expect(status == 75)
            #expect(
                printed.hasPrefix("deltasnap sync: backing off: the last sync failed; waiting before the next attempt (--force tries now) (retry at "),
                "\(printed)")
            #expect(printed.contains("; the last failure: server unavailable:"), "\(printed)")
            (status, printed) = try await runDeltasnap(live + ["--force"])
            #expect(status == 0, "\(printed)")
            // Refused for good (no such collection): exit 1, and no "retry in" that means nothing.
            (status, printed) = try await runDeltasnap(
                ["sync", "--store", store, "--snapshot", snapshot.path, "--url", harness.apiURL().absoluteString + "/nothing", "--force"])
            #expect(status == 1)
            #expect(!printed.contains("retry in"), "\(printed)")
        }
    }

    @Test("sign-out with a denied write waiting says what settles it, once, without a repeated prefix")
    func signOutWithDeniedWrite() async throws {
        try await withHarness(configure: { $0.clientWritable = [] }) { harness in
            try await harness.put(#"{"id":"a"}"#)
            let snapshot = try await harness.bake("v1")
            let store = harness.directory.appendingPathComponent("cli.sqlite").path
            let sync = ["sync", "--store", store, "--snapshot", snapshot.path, "--url", harness.apiURL().absoluteString, "--client-key", appKey]
            #expect(try await runDeltasnap(sync).0 == 0)
            var (status, printed) = try await runDeltasnap(["put", "--store", store, "--collection", items], input: #"{"id":"a","edited":true}"#)
            #expect(status == 0, "\(printed)")
            (status, printed) = try await runDeltasnap(sync)
            #expect(status == 0, "\(printed)")
            (status, printed) = try await runDeltasnap(["sign-out", "--store", store])
            #expect(status == 1)
            #expect(
                printed.contains(
                    "sign-out: cannot sign out: 1 denied write waits to be discarded or edited (deltasnap resolve --keep server); or sign-out --discard-pending (0 queued, 0 conflicted, 1 denied)"
                ), "\(printed)")
            #expect(!printed.contains("configuration:"), "\(printed)")
            (status, printed) = try await runDeltasnap(["resolve", "--store", store, "--collection", items, "a", "--keep", "server"])
            #expect(status == 0, "\(printed)")
            (status, printed) = try await runDeltasnap(["sign-out", "--store", store])
            #expect(status == 0, "\(printed)")
        }
    }
}

extension Harness {
    /// The server's current `ETag` for the test collection.
    func serverETag() async throws -> String? {
        var request = URLRequest(url: apiURL().appendingPathComponent(items))
        request.httpMethod = "GET"
        let (_, response) = try await URLSession.shared.data(for: request)
        return (response as? HTTPURLResponse)?.value(forHTTPHeaderField: "ETag")
    }
}

import DeltaClient
import DeltaCore
import DeltaTestSupport
import Foundation
import Testing

/// Runs `deltasnap` with `input` on its standard input.
func runDeltasnap(_ arguments: [String], input: String) async throws -> (Int32, String) {
    let file = FileManager.default.temporaryDirectory.appendingPathComponent("stdin-\(UUID().uuidString)")
    try Data(input.utf8).write(to: file)
    defer { try? FileManager.default.removeItem(at: file) }
    return try await runDeltasnap(arguments + [file.path])
}

@Suite("deltasnap put, delete, status, conflicts, resolve and sync --client-key as real processes")
struct WriteCommandTests {
    @Test("local writes show in dump and status at once, sync pushes them and reports conflicts in JSON, resolve settles them")
    func writeCommands() async throws {
        try await withHarness { harness in
            try await harness.put(#"{"id":"a","n":1}"#, #"{"id":"b","n":1}"#)
            let snapshot = try await harness.bake("v1")
            let store = harness.directory.appendingPathComponent("cli.sqlite").path
            let sync = ["sync", "--store", store, "--snapshot", snapshot.path, "--url", harness.apiURL().absoluteString, "--client-key", appKey]
            var (status, printed) = try await runDeltasnap(sync)
            #expect(status == 0)
            (status, printed) = try await runDeltasnap(["put", "--store", store, "--collection", items], input: #"{"n":2, "id":"a"}"#)
            #expect(status == 0)
            #expect(printed == "items/a: pending\n")
            (status, printed) = try await runDeltasnap(["put", "--store", store, "--collection", items], input: #"{"id":"c","n":1}"#)
            (status, printed) = try await runDeltasnap(["delete", "--store", store, "--collection", items, "b"])
            #expect(printed == "items/b: pending delete\n")
            (status, printed) = try await runDeltasnap(["dump", "--store", store, "--collection", items])
            #expect(printed == "{\"id\":\"a\",\"n\":2}\n{\"id\":\"c\",\"n\":1}\n")
            (status, printed) = try await runDeltasnap(["status", "--store", store, "--json"])
            #expect(printed.contains(#""collections":[{"conflicted":0,"etag":"#))
            #expect(printed.contains(#""name":"items","pending":3}]"#))
            (status, printed) = try await runDeltasnap(["put", "--store", store, "--collection", "nope"], input: #"{"id":"x"}"#)
            #expect(status == 1)
            #expect(printed.contains("the replica holds no such collection (nope; it holds items)"))

            // The server changes "a" meanwhile: the push turns that write down as a conflict.
            try await harness.put(#"{"id":"a","n":7}"#)
            (status, printed) = try await runDeltasnap(sync + ["--json"])
            #expect(status == 0)
            #expect(
                printed.contains(
                    #""pushed":{"applied":2,"conflicts":[{"collection":"items","id":"a","local":{"id":"a","n":2},"mutation":1,"reason":"changed","server":{"id":"a","n":7}}],"error":null,"unchanged":0}"#
                ))
            (status, printed) = try await runDeltasnap(["conflicts", "--store", store])
            #expect(printed == "items/a: changed\n  local:  {\"id\":\"a\",\"n\":2}\n  server: {\"id\":\"a\",\"n\":7}\n")
            (status, printed) = try await runDeltasnap(["resolve", "--store", store, "--collection", items, "a", "--keep", "local"])
            #expect(status == 0)
            (status, printed) = try await runDeltasnap(sync)
            #expect(status == 0)
            #expect(printed.contains("pushed: 1 applied, 0 unchanged, 0 conflicts"))
            #expect(try await harness.serverRecords() == ["a": #"{"id":"a","n":2}"#, "c": #"{"id":"c","n":1}"#])
            (status, printed) = try await runDeltasnap(["status", "--store", store])
            #expect(printed.contains("items: 0 pending, 0 conflicted"))
            (status, printed) = try await runDeltasnap(["conflicts", "--store", store, "--json"])
            #expect(printed == "")
        }
    }
}

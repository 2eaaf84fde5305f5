import DeltaClient
import DeltaCore
import DeltaTestSupport
import Foundation
import Testing

@Suite("deltasnap sync --filter, bake --filter, query and search as real processes")
struct QueryCommandTests {
    @Test("a collection URL with its selection, --filter/--limit, query and search print NDJSON; bad input says what it expects")
    func selectionsQueryAndSearch() async throws {
        try await withHarness { harness in
            try await harness.put(
                #"{"id":"a","c":"red","name":"Red Kite"}"#, #"{"id":"b","c":"blue","name":"Blue Duck"}"#, #"{"id":"c","c":"red","name":"Red Knot"}"#)
            let snapshot = try await harness.bake("v1")
            let store = harness.directory.appendingPathComponent("cli.sqlite").path
            let filter = #"{"c":{"eq":"red"}}"#
            let collectionURL =
                harness.apiURL().absoluteString + "/items?filter=" + filter.addingPercentEncoding(withAllowedCharacters: .alphanumerics)! + "&limit=1"
            var (status, printed) = try await runDeltasnap([
                "sync", "--store", store, "--snapshot", snapshot.path, "--url", collectionURL, "--search", "items=name", "--index", "items=c",
            ])
            #expect(status == 0, "\(printed)")
            #expect(printed.contains("items: replaced by the full dataset: 1 records"))
            (status, printed) = try await runDeltasnap(["dump", "--store", store, "--collection", "items"])
            #expect(printed == #"{"c":"red","id":"a","name":"Red Kite"}"# + "\n")
            // The same selection with the options instead of the URL: nothing to reset, 304.
            (status, printed) = try await runDeltasnap([
                "sync", "--store", store, "--snapshot", snapshot.path, "--url", harness.apiURL().absoluteString, "--filter", "items=" + filter, "--limit",
                "items=1",
            ])
            #expect(printed.contains("items: not modified"), "\(printed)")
            (status, printed) = try await runDeltasnap(["query", "--store", store, "--collection", "items", "--filter", #"{"c":{"in":["red","blue"]}}"#])
            #expect(status == 0)
            #expect(printed == #"{"c":"red","id":"a","name":"Red Kite"}"# + "\n")
            (status, printed) = try await runDeltasnap(["search", "--store", store, "--collection", "items", "KITE"])
            #expect(printed == #"{"c":"red","id":"a","name":"Red Kite"}"# + "\n")
            // Without a selection: the whole collection, ordered and searched.
            (status, printed) = try await runDeltasnap([
                "sync", "--store", store, "--snapshot", snapshot.path, "--url", harness.apiURL().absoluteString, "--index", "items=name",
                "--compound-index", "items=c,name",
            ])
            #expect(status == 0, "\(printed)")
            (status, printed) = try await runDeltasnap(["query", "--store", store, "--collection", "items", "--order-by", "name", "--limit", "2"])
            #expect(printed == #"{"c":"blue","id":"b","name":"Blue Duck"}"# + "\n" + #"{"c":"red","id":"a","name":"Red Kite"}"# + "\n")
            (status, printed) = try await runDeltasnap([
                "query", "--store", store, "--collection", "items", "--filter", filter, "--order-by", "name", "--descending", "--limit", "1",
            ])
            #expect(printed == #"{"c":"red","id":"c","name":"Red Knot"}"# + "\n")
            (status, printed) = try await runDeltasnap(["search", "--store", store, "--collection", "items", "red k"])
            #expect(Set(printed.split(separator: "\n")) == [#"{"c":"red","id":"a","name":"Red Kite"}"#, #"{"c":"red","id":"c","name":"Red Knot"}"#])
            // A snapshot baked for the selection: installed with its token, so the first sync is a 304.
            let baked = harness.directory.appendingPathComponent("red.snapshot").path
            (status, printed) = try await runDeltasnap([
                "bake", "--db", harness.directory.appendingPathComponent("server.sqlite").path, "--collection", "items",
                "--filter", filter, "--limit", "1", "--out", baked,
            ])
            #expect(status == 0 && printed.contains("baked 1 records of items"), "\(printed)")
            let fresh = harness.directory.appendingPathComponent("fresh.sqlite").path
            (status, printed) = try await runDeltasnap(["sync", "--store", fresh, "--snapshot", baked, "--url", collectionURL])
            #expect(printed.contains("items: not modified"), "\(printed)")
            (status, printed) = try await runDeltasnap(["dump", "--store", fresh, "--collection", "items"])
            #expect(printed == #"{"c":"red","id":"a","name":"Red Kite"}"# + "\n")
            for (arguments, says) in [
                (["sync", "--store", store, "--snapshot", snapshot.path, "--url", harness.apiURL().absoluteString + "/items/a"], "expected the API root"),
                (
                    ["sync", "--store", store, "--snapshot", snapshot.path, "--url", harness.apiURL().absoluteString, "--filter", #"items={"c":{"like":1}}"#],
                    "unknown operator"
                ),
                (["sync", "--store", store, "--snapshot", snapshot.path, "--url", harness.apiURL().absoluteString, "--limit", "items"], "COLLECTION=VALUE"),
                (["query", "--store", store, "--collection", "items", "--filter", #"{"c":1}"#], "exactly one operator"),
                (
                    ["sync", "--store", store, "--snapshot", snapshot.path, "--url", harness.apiURL().absoluteString, "--compound-index", "items=c"],
                    "two different members"
                ),
            ] {
                let (failed, message) = try await runDeltasnap(arguments)
                #expect(failed != 0 && message.contains(says), "\(arguments): \(message)")
            }
        }
    }
}

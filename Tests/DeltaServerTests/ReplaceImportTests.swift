import DeltaCore
import DeltaTestSupport
import Foundation
import Testing

/// Runs `deltasnap import` to its end.
private func runImport(_ arguments: [String]) async throws -> (Int32, String) {
    let process = try ChildProcess(try deltasnapExecutable(), ["import"] + arguments)
    let status = await process.stop(0, timeout: .seconds(120))
    return (status, process.printed)
}

@Suite("deltasnap import --replace: a whole dump, diffed")
struct ReplaceImportTests {
    let directory: String
    init() throws { directory = try makeTemporaryDirectory("deltasnap-replace") }

    private func write(_ name: String, _ text: String) throws -> String {
        let path = "\(directory)/\(name)"
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    @Test("unchanged records keep their position, changed and new ones are upserted, missing ones hidden, reappearing ones back", arguments: Backend.available)
    func diffing(backend: Backend) async throws {
        let database = try await backend.makeDatabase(in: URL(fileURLWithPath: directory))
        defer { Task { await database.remove() } }
        let db = database.location
        let day1 = try write("day1.ndjson", #"{"id":"a","x":1,"y":"k"}"# + "\n" + #"{"id":"b","x":2}"# + "\n" + #"{"id":"c","x":3}"# + "\n")
        var (status, printed) = try await runImport(["--db", db, "--collection", "items", "--replace", day1])
        #expect(status == 0, "\(printed)")
        #expect(printed == "imported 3 records into items: 3 upserted, 0 hidden, 0 unchanged; committed position 1\n")
        // Reordered keys and another spelling of the same number are the same content; b changes, c goes, d is new.
        let day2 = try write("day2.json", #"[{"y":"k","x":1.0,"id":"a"},{"id":"b","x":20},{"id":"d","x":4}]"#)
        (status, printed) = try await runImport(["--db", db, "--collection", "items", "--replace", day2])
        #expect(printed == "imported 3 records into items: 2 upserted, 1 hidden, 1 unchanged; committed position 2\n")
        var state = try await database.storedRecords("items")
        #expect(state["a"]?.position == 1)
        #expect(state["a"]?.hidden == false)
        #expect(state["b"]?.position == 2)
        #expect(state["b"]?.body == #"{"id":"b","x":20}"#)
        #expect(state["c"]?.hidden == true)
        #expect(state["c"]?.position == 2)
        #expect(state["d"]?.position == 2)
        // The same file again: nothing at all changes.
        (status, printed) = try await runImport(["--db", db, "--collection", "items", "--replace", day2])
        #expect(printed == "imported 3 records into items: 0 upserted, 0 hidden, 3 unchanged; nothing changed, no commit\n")
        // c reappears with its old content: it comes back.
        let day3 = try write(
            "day3.ndjson", [#"{"id":"a","x":1,"y":"k"}"#, #"{"id":"b","x":20}"#, #"{"id":"c","x":3}"#, #"{"id":"d","x":4}"#].joined(separator: "\n"))
        (status, printed) = try await runImport(["--db", db, "--collection", "items", "--replace", day3])
        #expect(printed == "imported 4 records into items: 1 upserted, 0 hidden, 3 unchanged; committed position 3\n")
        state = try await database.storedRecords("items")
        #expect(state["c"]?.hidden == false)
        #expect(state["c"]?.position == 3)
    }

    @Test("CSV dumps import with --id-column; duplicate ids and an empty --replace are refused and write nothing", arguments: Backend.available)
    func csvAndRefusals(backend: Backend) async throws {
        let database = try await backend.makeDatabase(in: URL(fileURLWithPath: directory))
        defer { Task { await database.remove() } }
        let db = database.location
        let csv = try write("runways.csv", "\"code\",\"name\",\"length\"\n1,\"One\",8000\n2,\"Two\",\n")
        var (status, printed) = try await runImport(["--db", db, "--collection", "runways", "--id-column", "code", "--replace", csv])
        #expect(status == 0, "\(printed)")
        #expect(try await database.storedRecords("runways")["1"]?.body == #"{"id":"1","length":8000,"name":"One"}"#)
        #expect(try await database.storedRecords("runways")["2"]?.body == #"{"id":"2","length":null,"name":"Two"}"#)
        let duplicate = try write("dup.csv", "code,name\n1,a\n1,b\n")
        (status, printed) = try await runImport(["--db", db, "--collection", "runways", "--id-column", "code", "--replace", duplicate])
        #expect(status != 0)
        #expect(printed.contains("record \"1\" in runways: written twice in one commit"))
        let empty = try write("empty.csv", "code,name\n")
        (status, printed) = try await runImport(["--db", db, "--collection", "runways", "--id-column", "code", "--replace", empty])
        #expect(status != 0)
        #expect(printed.contains("empty.csv: holds no records; --replace would hide the whole collection"))
        let bad = try write("bad.txt", "code,name\n1,\"a\n")
        (status, printed) = try await runImport(["--db", db, "--collection", "runways", "--format", "csv", "--id-column", "code", bad])
        #expect(status != 0)
        #expect(printed.contains("bad.txt: CSV: a quoted field is not closed (line 2 to the end of the input)"))
        #expect(try await database.storedRecords("runways").values.filter { !$0.hidden }.count == 2)
    }
}

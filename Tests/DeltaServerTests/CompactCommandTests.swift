import DeltaCore
import DeltaSQLite
import DeltaTestSupport
import Foundation
import Testing

@Suite("deltasnap compact as a real process")
struct CompactCommandTests {
    /// Runs deltasnap to its end: exit status and everything it printed.
    static func deltasnap(_ arguments: String...) async throws -> (status: Int32, printed: String) { try await run(arguments) }

    static func run(_ arguments: [String]) async throws -> (status: Int32, printed: String) {
        let process = try ChildProcess(try deltasnapExecutable(), arguments)
        return (await process.stop(0, timeout: .seconds(60)), process.printed)
    }

    @Test("bake --db records its token; compact keeps it unless --drop-baked, says what it dropped (text, JSON, dry run), and refuses unclear horizons")
    func compactCommand() async throws {
        let directory = try makeTemporaryDirectory("deltasnap-compact")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let db = "\(directory)/data.sqlite", file = "\(directory)/records.json"
        func load(_ json: String) async throws {
            try json.write(toFile: file, atomically: true, encoding: .utf8)
            #expect(try await Self.deltasnap("import", "--db", db, "--collection", "items", "--replace", file).status == 0)
        }
        try await load(#"[{"id":"a","n":1},{"id":"b","n":1},{"id":"c","n":1}]"#)
        #expect(try await Self.deltasnap("bake", "--db", db, "--collection", "items", "--out", "\(directory)/items.snapshot").status == 0)
        let baked = try #require(try Connection(path: db).text("SELECT etag FROM baked"))
        try await load(#"[{"id":"a","n":2},{"id":"b","n":1}]"#)  // a edited, c hidden: position 2
        try await load(#"[{"id":"a","n":3},{"id":"b","n":1}]"#)  // position 3

        let dry = try await Self.deltasnap("compact", "--db", db, "--older-than", "0s", "--drop-baked", "--dry-run")
        #expect(dry.status == 0)
        #expect(dry.printed.hasPrefix("would compact: horizon 3 (was 0); would drop 1 hidden records and 3 superseded versions\n"), "\(dry.printed)")
        let kept = try await Self.deltasnap("compact", "--db", db, "--older-than", "0s")
        #expect(kept.printed.hasPrefix("compacted: horizon 1 (was 0); dropped 0 hidden records and 0 superseded versions\nkept the horizon before 3 for snapshots still shipped (--drop-baked to compact past them):\n  kept: items baked "), "\(kept.printed)")
        #expect(kept.printed.contains(" at \(baked)\n"))
        let dropped = try await Self.deltasnap("compact", "--db", db, "--before", #"W/"1.\#(baked.dropFirst(5).prefix(16)).3.00000000""#, "--drop-baked", "--json")
        #expect(dropped.status == 0, "\(dropped.printed)")
        let report = try JSONValue(parsing: Array(dropped.printed.utf8.dropLast()))
        #expect(report["horizon"] == .number("3") && report["previousHorizon"] == .number("1"))
        #expect(report["droppedHidden"] == .number("1") && report["droppedVersions"] == .number("3"))
        guard case .array(let expired) = report["expiredBakes"], expired.first?["etag"] == .string(baked) else {
            Issue.record("the dropped bake is not reported: \(dropped.printed)")
            return
        }
        #expect(try Connection(path: db).integer("SELECT count(*) FROM records WHERE hidden = 1") == 0)

        for (arguments, message) in [
            (["compact", "--db", db], "compact: give exactly one of --before ETAG or --older-than DURATION"),
            (["compact", "--db", db, "--older-than", "30x"], "--older-than: expected a number and a unit s, m, h or d, as 30d"),
            (["compact", "--db", db, "--before", #"W/"1.0000000000000001.1.00000001""#], "--before: the token was issued by another database"),
            (["compact", "--db", db, "--before", "yesterday"], "--before: token: not an entity tag this server issued"),
        ] {
            let refused = try await Self.run(arguments)
            #expect(refused.status != 0 && refused.printed.contains(message), "\(arguments): \(refused.printed)")
        }
    }
}

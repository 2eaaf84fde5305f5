import DeltaCore
import DeltaSQLite
import DeltaTestSupport
import Foundation
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

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
        let db = "\(directory)/data.sqlite"
        let file = "\(directory)/records.json"
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
        #expect(
            kept.printed.hasPrefix(
                "compacted: horizon 1 (was 0); dropped 0 hidden records and 0 superseded versions\nkept the horizon before 3 for snapshots still shipped (--drop-baked to compact past them):\n  kept: items baked "
            ), "\(kept.printed)")
        #expect(kept.printed.contains(" at \(baked)\n"))
        let dropped = try await Self.deltasnap(
            "compact", "--db", db, "--before", #"W/"1.\#(baked.dropFirst(5).prefix(16)).3.00000000""#, "--drop-baked", "--json")
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

extension CompactCommandTests {
    @Test(
        "bake --url records its token through POST /bakes with the write secret (compact then keeps it), warns without one, and POST /bakes refuses strangers and bad entries"
    )
    func bakeFromServerRecords() async throws {
        let directory = try makeTemporaryDirectory("deltasnap-bake-url")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let db = "\(directory)/data.sqlite"
        let file = "\(directory)/records.json"
        try #"[{"id":"a"}]"#.write(toFile: file, atomically: true, encoding: .utf8)
        #expect(try await Self.deltasnap("import", "--db", db, "--collection", "items", file).status == 0)
        let (server, port) = try await startServer(db: db, environment: ["DELTASNAP_WRITE_TOKEN": "bake-secret-1"])
        defer { Task { await server.stop() } }
        let url = "http://127.0.0.1:\(port)/api/items"
        let unrecorded = try await Self.deltasnap("bake", "--url", url, "--out", "\(directory)/a.snapshot")
        #expect(unrecorded.status == 0 && unrecorded.printed.contains("the baked token is not recorded on the server"), "\(unrecorded.printed)")
        #expect(try Connection(path: db).integer("SELECT count(*) FROM baked") == 0)
        let recorded = try await Self.deltasnap("bake", "--url", url, "--out", "\(directory)/b.snapshot", "--write-token", "bake-secret-1")
        #expect(recorded.status == 0, "\(recorded.printed)")
        #expect(try Connection(path: db).integer("SELECT count(*) FROM baked") == 1)
        let refused = try await Self.deltasnap("bake", "--url", url, "--out", "\(directory)/c.snapshot", "--write-token", "wrong-secret")
        #expect(refused.status != 0 && refused.printed.contains("the server refused to record the baked token (401"), "\(refused.printed)")

        func post(_ body: String, secret: String = "bake-secret-1") async throws -> (Int, String) {
            var request = URLRequest(url: URL(string: "http://127.0.0.1:\(port)/bakes")!)
            request.httpMethod = "POST"
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
            request.setValue("Bearer \(secret)", forHTTPHeaderField: "Authorization")
            request.httpBody = Data(body.utf8)
            let (data, response) = try await URLSession.shared.data(for: request)
            return ((response as! HTTPURLResponse).statusCode, String(decoding: data, as: UTF8.self))
        }
        let head = try #require(try Connection(path: db).text("SELECT etag FROM baked"))
        let foreign = #"W/\"1.0000000000000001.1.00000001\""#
        for (body, status, text) in [
            (#"{"bakes":[{"collection":"items","token":"\#(head.replacingOccurrences(of: "\"", with: "\\\""))"}]}"#, 200, #"{"recorded":1}"#),
            (#"{"bakes":[]}"#, 400, "invalid-bake"), (#"["x"]"#, 400, "invalid-bake"),
            (#"{"bakes":[{"collection":"items","token":"\#(foreign)"}]}"#, 400, "issued by a different database"),
            (#"{"bakes":[{"collection":"no such","token":"x"}]}"#, 400, "is not a collection name"),
        ] {
            let (code, answer) = try await post(body)
            #expect(code == status && answer.contains(text), "\(body): \(code) \(answer)")
        }
        #expect(try await post(#"{"bakes":[]}"#, secret: "nope-nope-nope").0 == 401)
        #expect(try Connection(path: db).integer("SELECT count(*) FROM baked") == 1, "the same bake is recorded once")
        try #"[{"id":"a","v":2}]"#.write(toFile: file, atomically: true, encoding: .utf8)
        #expect(try await Self.deltasnap("import", "--db", db, "--collection", "items", file).status == 0)
        let compacted = try await Self.deltasnap("compact", "--db", db, "--older-than", "0s")
        #expect(compacted.status == 0 && compacted.printed.contains("  kept: items baked "), "\(compacted.printed)")
    }
}

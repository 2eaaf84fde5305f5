import DeltaCore
import DeltaTestSupport
import Foundation
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Whatever the server accepts, every reader reads back: its own parser, `bake`, `verify`,
/// `sync`, a `PUT` of what was read and a push of it. Records at and around every limit
/// (docs/PROTOCOL.md, *Records*), written to a real `deltasnap serve`, read by real processes.
@Suite("Limits hold for the canonical form: an accepted write is always readable")
struct LimitsRoundTripTests {
    static let owner = "limits-owner-secret"
    static let app = "limits-app-key"
    /// Just large enough for a 1 MiB string: records that grow once canonical reach it cheaply.
    static let bodyLimit = (1 << 20) + (8 << 10)

    @Test("generated records at every limit: refused with a 400 that names the member, or read back by every reader")
    func roundTrip() async throws {
        let seed = SeededGenerator.seed(for: "LimitsRoundTripTests.roundTrip")
        var random = SeededGenerator(seed: seed)
        let directory = try makeTemporaryDirectory("limits")
        defer {
            if ProcessInfo.processInfo.environment["DELTASNAP_KEEP"] == nil {
                try? FileManager.default.removeItem(atPath: directory)
            } else {
                print("kept \(directory)")
            }
        }
        let db = directory + "/server.sqlite"
        let server = try ChildProcess(
            try deltasnapExecutable(), ["serve", "--db", db, "--port", "0", "--client-writable", "items", "--max-body-bytes", String(Self.bodyLimit)],
            environment: ["DELTASNAP_WRITE_TOKEN": Self.owner, "DELTASNAP_CLIENT_KEY": Self.app])
        do {
            try await Self.check(server: server, directory: directory, db: db, seed: seed, random: &random)
        } catch {
            _ = await server.stop()
            throw error
        }
        _ = await server.stop()
    }

    /// Writes every case to `server`, then reads them back every way there is.
    static func check(server: ChildProcess, directory: String, db: String, seed: UInt64, random: inout SeededGenerator) async throws {
        let api = "http://127.0.0.1:\(try await server.announcedPort())/api"

        // The cases: one record each, the value under test in member "v" (or the id itself).
        var cases: [(id: String, json: String)] = []
        for (index, number) in LimitCases.numbers(&random).enumerated() { cases.append(("n\(index)", #"{"id":"n\#(index)","v":\#(number)}"#)) }
        for (index, string) in LimitCases.strings().enumerated() { cases.append(("s\(index)", #"{"id":"s\#(index)","v":\#(string)}"#)) }
        for depth in [63, 64, 65] {
            for arrays in [true, false] {
                cases.append(("d\(depth)\(arrays)", #"{"id":"d\#(depth)\#(arrays)","v":\#(LimitCases.nested(record: depth, arrays: arrays))}"#))
            }
        }
        // Records that fit the body as sent and grow once canonical: 1e20 is 21 bytes.
        let limit = RecordSize(bodyLimit: bodyLimit).maximumBytes
        for (index, slack) in [-22, -1, 0, 1, 40].enumerated() {
            let id = "g\(index)"
            let prefix = #"{"id":"\#(id)","v":["#
            let count = (limit - slack - prefix.utf8.count - 2) / 22
            let pad = limit - slack - prefix.utf8.count - 2 - count * 22
            var json = prefix + Array(repeating: "1e20", count: count).joined(separator: ",")
            json += (count > 0 ? "," : "") + String(repeating: "1", count: max(pad, 1)) + "]}"
            cases.append((id, json))
        }

        var accepted: [String: [UInt8]] = [:]
        for (id, json) in cases {
            let (status, body) = try await send("PUT", "\(api)/items/\(escape(id))", json)
            if status == 200 {
                accepted[id] = try Record(parsing: Array(json.utf8)).body
                continue
            }
            let sent = json.utf8.count > 300 ? "\(json.prefix(120))… (\(json.utf8.count) bytes)" : json
            #expect(status == 400 || status == 413, "\(sent): \(status) \(body)")
            #expect(body.contains(#""type":"#) && (body.contains("invalid-record") || body.contains("too-large")), "\(sent): \(body)")
            let fits = (try? Record(parsing: Array(json.utf8))).map { RecordSize(bodyLimit: bodyLimit).problem($0) == nil } ?? false
            #expect(!fits || json.utf8.count > bodyLimit, "the server refused what the parser and the size limit accept: \(sent): \(body)")
            if id.hasPrefix("n"), body.contains("canonically") { #expect(body.contains("at /v"), "\(sent): \(body)") }
        }
        for (index, idText) in LimitCases.ids().enumerated() {
            let json = #"{"id":\#(idText),"v":\#(index)}"#
            guard let record = try? Record(parsing: Array(json.utf8)) else {
                let (status, _) = try await send("POST", "\(api)/items", "[\(json)]")
                #expect(status == 400, "id \(idText.prefix(20))…: \(status)")
                continue
            }
            let (status, body) = try await send("PUT", "\(api)/items/\(escape(record.id))", json)
            #expect(status == 200, "\(body)")
            if status == 200 { accepted[record.id] = record.body }
        }
        #expect(accepted.count > cases.count / 3, "too few cases accepted to mean anything (\(accepted.count) of \(cases.count))")
        #expect(accepted.count < cases.count, "no case refused: the generator no longer reaches the limits")

        // The server's own full answer, read by the client's parser: every accepted record as written.
        let (status, full) = try await send("GET", "\(api)/items", nil)
        #expect(status == 200)
        var reader = EnvelopeReader(collection: try CollectionName("items"))
        try reader.feed(Array(full.utf8))
        try reader.finish()
        var read: [String: Record] = [:]
        while let record = try reader.next() { read[record.id] = record }
        #expect(Set(read.keys) == Set(accepted.keys))
        for (id, body) in accepted { #expect(read[id]?.body == body, "record \(id.prefix(40)) reads back otherwise") }

        // What was read goes back: a PUT of the same bytes changes nothing; so does a push of them.
        for record in read.values {
            let (status, body) = try await send("PUT", "\(api)/items/\(escape(record.id))", String(decoding: record.wireJSON, as: UTF8.self))
            #expect(status == 200 && body.contains(#""unchanged":1"#), "PUT back \(record.id.prefix(40)): \(status) \(body.prefix(300))")
        }
        // Each record pushed back as read (unchanged), then edited without a base: a conflict
        // whose answer carries the server's record four levels deep.
        let collection = try CollectionName("items")
        for (index, record) in read.values.enumerated() {
            guard case .object(var members) = try JSONValue(parsing: record.body) else { continue }
            members.append(JSONMember(key: "~edited", value: .bool(true)))
            let edited = try Record(value: .object(members))
            var mutations = [DeltaCore.Mutation(id: 1, collection: collection, put: record, base: nil)]
            if RecordSize(bodyLimit: bodyLimit / 2).problem(edited) == nil {
                mutations.append(DeltaCore.Mutation(id: 2, collection: collection, put: edited, base: nil))
            }
            let push = PushRequest(client: "limits-\(seed)-\(index)", mutations: mutations)
            let (status, body) = try await send(
                "POST", api.replacingOccurrences(of: "/api", with: "/push"), String(decoding: push.bytes, as: UTF8.self), key: app)
            #expect(status == 200, "push \(record.id.prefix(40)): \(status) \(body.prefix(300))")
            guard status == 200 else { continue }
            let answer = try PushResponse(parsing: Array(body.utf8))
            #expect(
                answer.results.map(\.status) == Array([MutationResult.Status.unchanged, .conflict].prefix(mutations.count)),
                "push back \(record.id.prefix(40)): \(body.prefix(300))")
            #expect(answer.results.last?.server.map { $0.body == record.body } ?? true)
        }

        // bake (from the server and from its database), verify, and a replica synced from nothing.
        let snapshot = directory + "/items.snapshot"
        let fromDB = directory + "/db.snapshot"
        var (code, printed) = try await runDeltasnap(["bake", "--url", "\(api)/items", "--out", snapshot])
        #expect(code == 0, "bake --url: \(printed)")
        (code, printed) = try await runDeltasnap(["verify", snapshot])
        #expect(code == 0, "verify: \(printed)")
        (code, printed) = try await runDeltasnap(["bake", "--db", db, "--collection", "items", "--out", fromDB])
        #expect(code == 0, "bake --db: \(printed)")
        (code, printed) = try await runDeltasnap(["verify", fromDB])
        #expect(code == 0, "verify: \(printed)")
        let store = directory + "/replica.sqlite"
        (code, printed) = try await runDeltasnap(["sync", "--store", store, "--snapshot", snapshot, "--url", api])
        #expect(code == 0, "sync: \(printed)")
        // Megabytes of output: through a file, since nothing reads the pipe before the end.
        let dump = directory + "/dump.ndjson"
        (code, printed) = try await runProgram(
            "/bin/sh", ["-c", "\"$0\" dump --store \"$1\" --collection items > \"$2\"", try deltasnapExecutable(), store, dump])
        #expect(code == 0, "dump: \(printed)")
        let lines = try String(contentsOfFile: dump, encoding: .utf8).split(separator: "\n")
        let dumped = try lines.map { try Record(parsing: Array($0.utf8)) }
        #expect(Set(dumped.map(\.id)) == Set(accepted.keys))
        for record in dumped { #expect(accepted[record.id] == record.body, "the replica holds \(record.id.prefix(40)) otherwise") }
    }

    /// One request with the owner's secret (or `key`); the status and the body as text.
    static func send(_ method: String, _ url: String, _ body: String?, key: String = owner) async throws -> (Int, String) {
        var request = URLRequest(url: URL(string: url)!)
        request.httpMethod = method
        request.setValue("Bearer \(key)", forHTTPHeaderField: "Authorization")
        if let body {
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
            request.httpBody = Data(body.utf8)
        }
        let (data, response) = try await URLSession.shared.data(for: request)
        return ((response as! HTTPURLResponse).statusCode, String(decoding: data, as: UTF8.self))
    }

    /// A record id as one path segment.
    static func escape(_ id: String) -> String {
        id.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? id
    }
}

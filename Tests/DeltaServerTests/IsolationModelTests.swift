import DeltaCore
import DeltaServer
import DeltaStore
import DeltaTestSupport
import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
import Testing

/// The model-based isolation test (docs/SECURITY.md): random owners' writes and users' pushes move
/// rows between users, teams and sharing lists, hide and restore them; users read through a real
/// Varnish (granted cacheable reads included), replay old tokens, wait on long-polls, read single
/// records, write conditionally and retry pushes with another's client id. A reference, written
/// here by hand from the rules' text, says for every answer which rows and which versions its
/// principal may see, and every record-shaped object of every answer is held to it: tombstones
/// must be `{"hidden":true,"id":…}` of a row the reader held, conflicts and denials may show only
/// the reader's own version, a record read is `200` exactly when the reference gives the row.
@Suite("Isolation, model-based: every byte of every answer is what its principal may read")
struct IsolationModelTests {
    static let users = ["u0", "u1", "u2", "u3"]
    /// The ids each collection's random writes use.
    static let ids = 0..<8
    static let prefixes = ["notes": "n", "posts": "p", "docs": "d", "members": "m"]
    /// Rounds per run (DELTASNAP_ISOLATION_ROUNDS; Scripts/reliability.sh asks for more).
    static let rounds = ProcessInfo.processInfo.environment["DELTASNAP_ISOLATION_ROUNDS"].flatMap { Int($0) } ?? 12
    /// The reads every user keeps a replica of, with what the selection keeps of the rule's rows.
    static let reads: [(path: String, keep: @Sendable ([String: String]) -> [String: String])] = [
        ("/api/notes", { $0 }), ("/api/posts", { $0 }), ("/api/docs", { $0 }), ("/api/members", { $0 }),
        ("/api/posts?limit=2", { rows in rows.filter { Set(rows.keys.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }.prefix(2)).contains($0.key) } }),
        (
            "/api/docs?filter=" + #"{"n":{"lt":2}}"#.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!,
            { rows in
                rows.filter { (try? JSONValue(parsing: Array($0.value.utf8)))?["n"].flatMap { if case .number(let n) = $0 { Int(n) } else { nil } } ?? 9 < 2 }
            }
        ),
    ]

    /// What the test counts, printed at the end.
    struct Tally {
        var answers = 0
        var bytes = 0
        var tombstones = 0
        var replays = 0
        var granted = 0
        var pushes = 0
        var records = 0
        var conditionals = 0
    }

    @Test("Random writes, pushes, reads, replays, long-polls, grants through Varnish, record reads and conditional writes", arguments: Backend.available)
    func randomized(backend: Backend) async throws {
        let seed = SeededGenerator.seed(for: "IsolationModelTests.randomized(\(backend))")
        // Browsers' pages may call it too (CORS): a listed origin, and any origin's public reads.
        let allowed = try CrossOrigin([Self.page, "*"])
        try await withUserServer(backend: backend, rules: exampleRules, grantLifetime: 3600, configure: { $0.crossOrigin = allowed }) { origin, store in
            let directory = try makeTemporaryDirectory("varnish-isolation")
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let (varnish, port) = try await BlobCacheTests.startVarnish(upstream: try #require(origin.port), directory: directory)
            defer { Task { await varnish.stop(SIGKILL) } }
            for (collection, body) in [
                ("members", #"{"id":"m0","team":"t0","user":"u0"}"#), ("posts", #"{"id":"p0","n":0,"team":"t0","text":"first"}"#),
                ("docs", #"{"editors":[],"id":"d0","n":0,"owner":"u1","text":"first"}"#), ("notes", #"{"id":"n0","owner":"u2","text":"first"}"#),
            ] {
                _ = try await origin.write(.put, "/api/\(collection)/\(Self.prefixes[collection]!)0", body)
            }
            var tokens: [String: String] = [:]
            for user in Self.users { tokens[user] = try await Mint.hs256(user) }
            let minted = tokens
            let tally = try await TestClient.withClient(host: "127.0.0.1", port: port) { cache -> Tally in
                var random = SeededGenerator(seed: seed)
                var tally = Tally()
                var replicas: [String: ModelReplica] = [:]
                var history: [String: [ModelReplica]] = [:]
                var pushed: [String: UInt64] = [:]
                var lastPush: [String: (body: String, results: [JSONValue])] = [:]
                var publicReplicas: [String: ModelReplica] = [:]
                for round in 0..<Self.rounds {
                    let context = "seed \(seed) round \(round) on \(backend)"
                    for _ in 0..<Int.random(in: 1...4, using: &random) { try await Self.ownerWrite(&random, origin) }
                    var reference = ReferenceRules(state: try await Self.state(origin))
                    // A user's push; sometimes another user retries it with the same client id.
                    let pusher = Self.users.randomElement(using: &random)!
                    try await Self.push(&random, origin, store, pusher, minted, reference, &pushed, &lastPush, &tally, context)
                    if let (victim, last) = lastPush.randomElement(using: &random), victim != pusher {
                        let stolen = try await origin.write(.post, "/push", last.body, auth: "Bearer \(minted[pusher]!)")
                        #expect(
                            stolen.status == .forbidden && stolen.text.contains("client-owned"),
                            "\(context): \(pusher) replayed \(victim)'s push: \(stolen.text)")
                        #expect(!stolen.text.contains("results"), "\(context): a recorded answer reached another principal")
                    }
                    reference = ReferenceRules(state: try await Self.state(origin))
                    // A push answered rounds ago repeated now (its answer was lost), after the owner's
                    // writes since: a record shown again only while the row is the pusher's to read
                    // now, and only as recorded (nothing newer).
                    for (user, last) in lastPush.sorted(by: { $0.key < $1.key }) {
                        let again = try await origin.write(.post, "/push", last.body, auth: "Bearer \(minted[user]!)")
                        #expect(again.status == .ok, "\(context): \(user)'s push repeated: \(again.text)")
                        if case .array(let replayed)? = try JSONValue(parsing: again.bytes)["results"],
                            case .array(let sent)? = try JSONValue(parsing: Array(last.body.utf8))["mutations"]
                        {
                            for ((result, recorded), mutation) in zip(zip(replayed, last.results), sent) {
                                guard case .string(let collection)? = mutation["collection"],
                                    case .string(let id)? = mutation["recordId"] ?? mutation["record"]?["id"],
                                    case .object(let shown)? = result["server"], shown.contains(where: { $0.key != "id" && $0.key != "hidden" })
                                else { continue }
                                #expect(
                                    reference.visible(collection, to: user)[id] != nil,
                                    "\(context): \(user)'s repeated push showed \(collection)/\(id), not theirs to read now: \(again.text)")
                                #expect(result == recorded, "\(context): \(user)'s repeated push showed more than it first did: \(again.text)")
                            }
                        }
                    }
                    for user in Self.users {
                        let token = minted[user]!
                        for read in Self.reads {
                            let key = "\(user) \(read.path)"
                            let collection = String(read.path.dropFirst(5).prefix { $0 != "?" })
                            let expected = read.keep(Self.strings(reference.visible(collection, to: user)))
                            var replica = replicas[key] ?? ModelReplica()
                            let held = replica.records
                            // Most reads go through Varnish and may be sent to a grant; some wait on a long-poll.
                            let reply: HTTPReply
                            if Int.random(in: 0..<20, using: &random) == 0, replica.etag != nil {
                                let waiting = read.path + (read.path.contains("?") ? "&" : "?") + "wait=1"
                                let page = Self.pages.randomElement(using: &random)!
                                reply = try await cache.send(waiting, .get, headers: Self.headers(token, replica.etag, client: nil, origin: page)).decoded()
                                Self.checkCrossOrigin(reply, page, "\(context): \(key) long-poll")
                                _ = try replica.apply(reply, sentETag: replica.etag)
                            } else {
                                let (first, answer) = try await ReadGrantTests.sync(cache, token, &replica, path: read.path)
                                reply = try (answer ?? first).decoded()
                                if answer != nil { tally.granted += 1 }
                            }
                            try Self.check(reply, held: held, expected: expected, collection: collection, &tally, "\(context): \(key)")
                            #expect(replica.records == expected, "\(context): \(key)")
                            #expect(replica.resets == 0, "\(context): \(key) reset")
                            replicas[key] = replica
                            history[key, default: []].append(replica)
                            // A replay of an older token of theirs: exactly what changed since, nothing more.
                            if let old = history[key]?.dropLast().randomElement(using: &random), let etag = old.etag {
                                // From a browser's page too: the same rows, and the page may read them only when listed.
                                let page = Self.pages.randomElement(using: &random)!
                                let replay = try await cache.send(read.path, .get, headers: Self.headers(token, etag, client: nil, origin: page)).decoded()
                                Self.checkCrossOrigin(replay, page, "\(context): \(key) replay")
                                var applied = old
                                _ = try applied.apply(replay, sentETag: etag)
                                try Self.check(replay, held: old.records, expected: expected, collection: collection, &tally, "\(context): \(key) replay")
                                #expect(applied.records == expected, "\(context): \(key) replay")
                                tally.replays += 1
                            }
                        }
                        try await Self.records(&random, origin, user, token, reference, &tally, context)
                        // A conditional write that went through changes what every later reader may see.
                        if try await Self.conditional(&random, origin, store, user, token, reference, &tally, context) {
                            reference = ReferenceRules(state: try await Self.state(origin))
                        }
                        // Another install's client id on a pull: nothing of its mutations.
                        if let other = Self.users.filter({ $0 != user }).randomElement(using: &random) {
                            let pull = try await origin.get("/api/notes", as: token, [HTTPField.Name("Delta-Client")!: "\(other)-device"])
                            // `0`, as for an id that never pushed: nothing told.
                            #expect([nil, "0"].contains(pull.header("Delta-Last-Mutation")), "\(context): \(user) learned \(other)'s last mutation")
                        }
                    }
                    // The other principals: the client key and nobody read no restricted row.
                    for collection in ["notes", "posts", "docs", "members"] {
                        let id = "\(Self.prefixes[collection]!)\(Int.random(in: Self.ids, using: &random))"
                        for (auth, status) in [("Bearer client-key-123", HTTPResponse.Status.forbidden), (nil, .unauthorized)] {
                            var headers: HTTPFields = [:]
                            if let auth { headers[.authorization] = auth }
                            let all = try await origin.get("/api/\(collection)", headers)
                            let one = try await origin.get("/api/\(collection)/\(id)", headers)
                            #expect(
                                all.status == status && one.status == status, "\(context): \(auth ?? "nobody") read \(collection): \(all.status) \(one.status)")
                            tally.answers += 2
                        }
                    }
                    try await Self.publicReads(round, origin, minted, &publicReplicas, &tally, context)
                    try await Self.ownerReadsNotKept(origin, minted, &tally, context)
                }
                return tally
            }
            #expect(tally.granted > 0 && tally.tombstones > 0 && tally.replays > 0, "seed \(seed): the run exercised too little: \(tally)")
            print(
                "IsolationModelTests.randomized: seed \(seed) on \(backend): \(tally.answers) answers (\(tally.bytes) bytes) checked, "
                    + "\(tally.tombstones) tombstones, \(tally.replays) replays, \(tally.granted) granted reads, \(tally.pushes) pushes, "
                    + "\(tally.records) record reads, \(tally.conditionals) conditional writes; findings: 0 unless reported above")
            await varnish.stop(SIGKILL)
        }
    }

    /// The request headers of a user's read; with `origin`, as a browser's page on it sends it.
    static func headers(_ token: String, _ etag: String?, client: String?, origin: String? = nil) -> HTTPFields {
        var headers: HTTPFields = [.authorization: "Bearer \(token)"]
        if let etag { headers[.ifNoneMatch] = etag }
        if let client { headers[HTTPField.Name("Delta-Client")!] = client }
        if let origin { headers[.origin] = origin }
        return headers
    }

    /// The origin the server lists (`--allow-origin`), beside `*`.
    static let page = "https://app.example.com"
    /// Who asks: no page (an app), the listed page, a page on an origin not listed.
    static let pages: [String?] = [nil, page, "https://elsewhere.example.org"]

    /// A user's answer names the listed page, and no other: `*` never covers a read with a credential.
    static func checkCrossOrigin(_ reply: HTTPReply, _ page: String?, _ context: String) {
        let allowed = reply.headers[.accessControlAllowOrigin]
        #expect(allowed == (page == Self.page ? page : nil), "\(context): from \(page ?? "no page"), Access-Control-Allow-Origin \(allowed ?? "none")")
    }

    /// Canonical text of each row.
    static func strings(_ rows: [String: JSONValue]) -> [String: String] { rows.mapValues { String(decoding: $0.canonicalBytes, as: UTF8.self) } }

    /// Every record of an answer to a read, byte by byte: a visible one exactly as the reference
    /// gives it now, a tombstone exactly `{"hidden":true,"id":…}` of a row the reader held.
    static func check(_ reply: HTTPReply, held: [String: String], expected: [String: String], collection: String, _ tally: inout Tally, _ context: String)
        throws
    {
        tally.answers += 1
        tally.bytes += reply.bytes.count
        guard reply.status == 200 else {
            #expect(reply.status == 304, "\(context): \(reply.status) \(reply.text.prefix(200))")
            #expect(reply.bytes.isEmpty, "\(context): a 304 with a body")
            return
        }
        guard case .object(let members) = try JSONValue(parsing: reply.bytes), members.count == 1, members[0].key == collection,
            case .array(let items) = members[0].value
        else {
            Issue.record("\(context): not a body of \(collection): \(reply.text.prefix(200))")
            return
        }
        let delta = reply.header("Delta-Mode") == "delta"
        for item in items {
            guard case .object(let fields) = item, case .string(let id)? = item["id"] else {
                Issue.record("\(context): not a record: \(String(decoding: item.canonicalBytes, as: UTF8.self))")
                continue
            }
            if item["hidden"] == .bool(true) {
                tally.tombstones += 1
                #expect(delta, "\(context): a tombstone in a full answer")
                #expect(
                    fields.map(\.key) == ["hidden", "id"], "\(context): tombstone of \(id) carries \(String(decoding: item.canonicalBytes, as: UTF8.self))")
                #expect(held[id] != nil, "\(context): a tombstone of \(id), which the reader never held")
            } else {
                let body = String(decoding: try Record(value: item).body, as: UTF8.self)
                #expect(expected[id] == body, "\(context): \(body) is not the reader's (the reference has \(expected[id] ?? "nothing"))")
            }
        }
    }

    /// Every object in `value` shaped as a record of `collection` (an `"id"` of its ids and more
    /// members) must be the version the reference gives `user` now.
    static func checkShown(_ value: JSONValue, _ collection: String, _ user: String, _ reference: ReferenceRules, _ context: String) {
        switch value {
        case .object(let members):
            // A bare `{"hidden":true,"id":…}` says no more than the id the reader named.
            if case .string(let id)? = value["id"], id.hasPrefix(prefixes[collection]!), members.contains(where: { $0.key != "id" && $0.key != "hidden" }) {
                let body = String(decoding: JSONValue.object(members.filter { $0.key != "hidden" }).canonicalBytes, as: UTF8.self)
                let mine = strings(reference.visible(collection, to: user))[id]
                #expect(mine == body, "\(context): \(user) was shown \(body) (theirs: \(mine ?? "nothing"))")
            }
            for member in members { checkShown(member.value, collection, user, reference, context) }
        case .array(let items): for item in items { checkShown(item, collection, user, reference, context) }
        default: break
        }
    }

    /// One random owner write: notes, posts and docs written, moved, shared, hidden and restored; memberships changed.
    static func ownerWrite(_ random: inout SeededGenerator, _ client: some TestClientProtocol) async throws {
        let id = Int.random(in: ids, using: &random)
        let user = users.randomElement(using: &random)!
        let n = Int.random(in: 0..<4, using: &random)
        let text = "v\(UInt32.random(in: 0...UInt32.max, using: &random))"
        switch Int.random(in: 0..<10, using: &random) {
        case 0: _ = try await client.write(.put, "/api/members/m\(id)", #"{"id":"m\#(id)","team":"t\#(n % 3)","user":"\#(user)"}"#)
        case 1: _ = try await client.execute(uri: "/api/members/m\(id)", method: .delete, headers: [.authorization: "Bearer \(secret)"])
        case 2, 3: _ = try await client.write(.put, "/api/posts/p\(id)", #"{"id":"p\#(id)","n":\#(n),"team":"t\#(n % 3)","text":"\#(text)"}"#)
        case 4:
            let editors = users.filter { _ in Bool.random(using: &random) }.map { #""\#($0)""# }.joined(separator: ",")
            _ = try await client.write(.put, "/api/docs/d\(id)", #"{"editors":[\#(editors)],"id":"d\#(id)","n":\#(n),"owner":"\#(user)","text":"\#(text)"}"#)
        case 5, 6: _ = try await client.write(.put, "/api/notes/n\(id)", #"{"id":"n\#(id)","owner":"\#(user)","text":"\#(text)"}"#)
        default:
            let collection = ["posts", "docs", "notes"].randomElement(using: &random)!
            _ = try await client.execute(
                uri: "/api/\(collection)/\(prefixes[collection]!)\(id)", method: .delete, headers: [.authorization: "Bearer \(secret)"])
        }
    }

    /// The server's visible records, read by the owner.
    static func state(_ client: some TestClientProtocol) async throws -> [String: [String: JSONValue]] {
        var state = try await UserConvergenceTests.state(client)
        let notes = try await client.get("/api/notes", as: secret)
        if case .object(let members) = try JSONValue(parsing: notes.bytes), case .array(let items) = members.first?.value {
            for item in items { if case .string(let id)? = item["id"] { state["notes", default: [:]][id] = item } }
        }
        return state
    }

    /// A user's random push (puts with and without `create`, over visible, hidden and absent rows, and deletes):
    /// nothing is applied over a stored version the user may not write, and no answer shows a version they may not read.
    static func push(
        _ random: inout SeededGenerator, _ origin: some TestClientProtocol, _ store: any ChangeStore, _ user: String, _ tokens: [String: String],
        _ reference: ReferenceRules, _ pushed: inout [String: UInt64], _ lastPush: inout [String: (body: String, results: [JSONValue])], _ tally: inout Tally,
        _ context: String
    ) async throws {
        var mutations: [String] = []
        var targets: [(collection: String, id: String, writable: Bool)] = []
        for _ in 0..<Int.random(in: 1...3, using: &random) {
            // Members: readable by users, written by nobody but the owner (a push there is `denied`, rule `collection`).
            let collection = ["notes", "posts", "docs", "notes", "posts", "docs", "members"].randomElement(using: &random)!
            let id = "\(prefixes[collection]!)\(Int.random(in: ids, using: &random))"
            guard !targets.contains(where: { $0.collection == collection && $0.id == id }) else { continue }
            let stored = try await store.record(id, in: try CollectionName(collection)).map { try JSONValue(parsing: $0.record.body) }
            let writable = collection != "members" && (stored.map { reference.writable(collection, $0, by: user) } ?? true)
            let number = (pushed[user] ?? 0) + UInt64(mutations.count) + 1
            let create = Bool.random(using: &random) ? #","create":true"# : ""
            if Int.random(in: 0..<4, using: &random) == 0 {
                mutations.append(#"{"id":\#(number),"collection":"\#(collection)","op":"delete","recordId":"\#(id)","base":null}"#)
            } else {
                let team = "t\(Int.random(in: 0..<3, using: &random))"
                let body =
                    switch collection {
                    case "posts": #"{"id":"\#(id)","n":1,"team":"\#(team)","text":"pushed"}"#
                    case "docs": #"{"editors":["\#(user)"],"id":"\#(id)","n":1,"owner":"\#(user)","text":"pushed"}"#
                    case "members": #"{"id":"\#(id)","team":"\#(team)","user":"\#(user)"}"#
                    default: #"{"id":"\#(id)","owner":"\#(user)","text":"pushed"}"#
                    }
                mutations.append(#"{"id":\#(number),"collection":"\#(collection)","op":"put","record":\#(body),"base":null\#(create)}"#)
            }
            targets.append((collection, id, writable))
        }
        let body = pushBody(mutations.joined(separator: ","), client: "\(user)-device")
        let answer = try await origin.write(.post, "/push", body, auth: "Bearer \(tokens[user]!)")
        tally.pushes += 1
        tally.answers += 1
        tally.bytes += answer.bytes.count
        #expect(answer.status == .ok, "\(context): \(user)'s push: \(answer.text)")
        guard case .array(let results)? = try JSONValue(parsing: answer.bytes)["results"] else { return }
        for (result, target) in zip(results, targets) {
            checkShown(result, target.collection, user, reference, "\(context): \(user)'s push")
            if !target.writable {
                #expect(
                    result["status"] != .string("applied"),
                    "\(context): \(user) wrote over \(target.collection)/\(target.id), stored as another's: \(answer.text)")
            }
            // A collection the user may write nothing in: the same answer whatever it holds, nothing of it shown.
            if target.collection == "members" {
                #expect(
                    result["status"] == .string("denied") && result["rule"] == .string("collection") && result["server"] == .null,
                    "\(context): \(user)'s push to members/\(target.id): \(answer.text)")
            }
        }
        pushed[user] = (pushed[user] ?? 0) + UInt64(mutations.count)
        lastPush[user] = (body, results)
        // The same push again (a lost answer): the recorded answers, to the same user only, showing nothing new.
        let again = try await origin.write(.post, "/push", body, auth: "Bearer \(tokens[user]!)")
        if case .array(let replayed)? = try JSONValue(parsing: again.bytes)["results"] {
            for (result, target) in zip(replayed, targets) { checkShown(result, target.collection, user, reference, "\(context): \(user)'s replayed push") }
        }
    }

    /// Single-record reads: `200` with the reader's version exactly when the reference gives the row, else the `404` of a row that does not exist.
    static func records(
        _ random: inout SeededGenerator, _ origin: some TestClientProtocol, _ user: String, _ token: String, _ reference: ReferenceRules, _ tally: inout Tally,
        _ context: String
    ) async throws {
        for collection in ["notes", "posts", "docs", "members"] {
            let id = "\(prefixes[collection]!)\(Int.random(in: ids, using: &random))"
            let reply = try await origin.get("/api/\(collection)/\(id)", as: token)
            tally.records += 1
            tally.answers += 1
            if let mine = strings(reference.visible(collection, to: user))[id] {
                #expect(reply.status == .ok && reply.text == mine + "\n", "\(context): \(user) GET \(collection)/\(id): \(reply.status) \(reply.text)")
            } else {
                let none = try await origin.get("/api/\(collection)/zz", as: token)
                #expect(reply.status == .notFound, "\(context): \(user) GET \(collection)/\(id): \(reply.status) \(reply.text)")
                #expect(reply.text.replacingOccurrences(of: id, with: "zz") == none.text, "\(context): a 404 that tells \(collection)/\(id) exists")
            }
        }
    }

    /// Conditional writes by a user over rows they may or may not read: a `412` shows nothing but
    /// the reader's own version. Returns whether the write went through.
    static func conditional(
        _ random: inout SeededGenerator, _ origin: some TestClientProtocol, _ store: any ChangeStore, _ user: String, _ token: String,
        _ reference: ReferenceRules, _ tally: inout Tally, _ context: String
    ) async throws -> Bool {
        let collection = ["notes", "posts", "docs"].randomElement(using: &random)!
        let id = "\(prefixes[collection]!)\(Int.random(in: ids, using: &random))"
        let body =
            collection == "posts"
            ? #"{"id":"\#(id)","n":1,"team":"t0","text":"conditional"}"#
            : #"{"editors":[],"id":"\#(id)","n":1,"owner":"\#(user)","text":"conditional"}"#
        var headers: HTTPFields = [.authorization: "Bearer \(token)", .contentType: "application/json"]
        if Bool.random(using: &random) { headers[.ifNoneMatch] = "*" } else { headers[.ifMatch] = #""1.0000000000000000.1.00000000""# }
        let stored = try await store.record(id, in: try CollectionName(collection)).map { try JSONValue(parsing: $0.record.body) }
        let reply = try await origin.execute(uri: "/api/\(collection)/\(id)", method: .put, headers: headers, body: ByteBuffer(string: body))
        tally.conditionals += 1
        tally.answers += 1
        if let value = try? JSONValue(parsing: reply.bytes) { checkShown(value, collection, user, reference, "\(context): \(user)'s conditional write") }
        if let stored, !reference.writable(collection, stored, by: user) {
            #expect(reply.status != .ok, "\(context): \(user) wrote over \(collection)/\(id), stored as another's")
        }
        return reply.status == .ok
    }
}

extension ReferenceRules {
    /// Whether the rules' write rule lets `user` change a stored version `record` of `collection`.
    func writable(_ collection: String, _ record: JSONValue, by user: String) -> Bool {
        switch collection {
        case "notes": return record["owner"] == .string(user)
        case "posts":
            let teams = (state["members"] ?? [:]).values.filter { $0["user"] == .string(user) }.compactMap { $0["team"] }
            return record["team"].map { teams.contains($0) } ?? false
        case "docs":
            if record["owner"] == .string(user) { return true }
            if case .array(let editors)? = record["editors"] { return editors.contains(.string(user)) }
            return false
        default: return false
        }
    }
}

extension IsolationModelTests {
    /// A public collection (`airports`): one owner's write a round, then every principal (nobody,
    /// the client key, each user) syncs it twice from the token it holds. The first principal's
    /// answer is computed and the others' are the server's memory of it (`ReadRoute+PublicAnswers`):
    /// each must be the rows the owner reads now, and the second read the first's bytes.
    static func publicReads(
        _ round: Int, _ origin: some TestClientProtocol, _ tokens: [String: String], _ replicas: inout [String: ModelReplica], _ tally: inout Tally,
        _ context: String
    ) async throws {
        // Every round changes a row: two of three put one, the third hides the one the round before put.
        if round % 3 == 2 {
            _ = try await origin.execute(uri: "/api/airports/a\((round - 1) % 8)", method: .delete, headers: [.authorization: "Bearer \(secret)"])
        } else {
            let id = "a\(round % 8)"
            _ = try await origin.write(.put, "/api/airports/\(id)", #"{"id":"\#(id)","name":"r\#(round)"}"#)
        }
        var owner = ModelReplica()
        _ = try owner.apply(try await origin.get("/api/airports", as: secret).reply, sentETag: nil)
        let principals: [(name: String, auth: String?)] = [("nobody", nil), ("client key", "client-key-123")] + users.map { ($0, "Bearer \(tokens[$0]!)") }
        for (name, auth) in principals {
            var replica = replicas[name] ?? ModelReplica()
            var headers: HTTPFields = [:]
            if let auth { headers[.authorization] = auth }
            if let etag = replica.etag { headers[.ifNoneMatch] = etag }
            let first = try await origin.get("/api/airports", headers)
            let second = try await origin.get("/api/airports", headers)
            #expect(first.status == .ok && second.status == .ok, "\(context): \(name) read airports: \(first.status) \(second.status)")
            #expect(second.bytes == first.bytes, "\(context): \(name)'s airports, asked twice from one token, differ")
            #expect(second.header("ETag") == first.header("ETag") && second.header("Delta-Mode") == first.header("Delta-Mode"), "\(context): \(name)")
            _ = try replica.apply(first.reply, sentETag: replica.etag)
            #expect(replica.records == owner.records, "\(context): \(name)'s airports")
            replicas[name] = replica
            tally.answers += 2
            tally.bytes += first.bytes.count + second.bytes.count
        }
    }

    /// The owner's reads of the restricted collections, asked twice, are never kept: the cacheable
    /// URL of their ends, which the raw path sends from memory before the decoder and before any
    /// credential is looked at, gives nobody, the client key or a user without a grant a single
    /// row. Asked over a raw socket: the test client's requests never take the raw path.
    static func ownerReadsNotKept(_ origin: some TestClientProtocol, _ tokens: [String: String], _ tally: inout Tally, _ context: String) async throws {
        let port = try #require(origin.port)
        for collection in ["notes", "posts", "docs", "members"] {
            _ = try await origin.get("/api/\(collection)", as: secret)
            let read = try await origin.get("/api/\(collection)", as: secret)
            let etag = try #require(read.header("ETag"), "\(context): the owner's read of \(collection) has no ETag")
            // The collection's token, without the owner's mark: what a user could put together from their own.
            let url = "/api/\(collection)?until=\(try Token(entityTag: etag).unmarked.urlValue)"
            for auth in [nil, "Bearer client-key-123"] + users.map({ "Bearer \(tokens[$0]!)" }) {
                let request = "GET \(url) HTTP/1.1\r\nHost: x\r\n" + (auth.map { "Authorization: \($0)\r\n" } ?? "") + "\r\n"
                let answer = try await rawExchange(port: port, request) { $0.hasSuffix("}\n") || $0.hasSuffix("]}") }
                #expect(
                    !answer.hasPrefix("HTTP/1.1 200") && !answer.contains(#""id":"#),
                    "\(context): \(auth?.prefix(20) ?? "nobody") read the owner's \(collection) at \(url): \(answer.prefix(300))")
                tally.answers += 1
            }
        }
    }
}

import DeltaCore
import DeltaServer
import DeltaStore
import DeltaTestSupport
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Testing

/// The rules of `UserRulesTests.rules`, evaluated by hand: the reference every answer is held to.
struct ReferenceRules {
    /// Server state: collection -> id -> record.
    let state: [String: [String: JSONValue]]

    func visible(_ collection: String, to user: String) -> [String: JSONValue] {
        let rows = state[collection] ?? [:]
        switch collection {
        case "members": return rows.filter { $0.value["user"] == .string(user) }
        case "notes": return rows.filter { $0.value["owner"] == .string(user) }
        case "posts":
            let teams = (state["members"] ?? [:]).values.filter { $0["user"] == .string(user) }.compactMap { $0["team"] }
            return rows.filter { row in row.value["team"].map { teams.contains($0) } ?? false }
        case "docs":
            return rows.filter { row in
                if row.value["owner"] == .string(user) { return true }
                if case .array(let editors)? = row.value["editors"] { return editors.contains(.string(user)) }
                return false
            }
        default: return [:]
        }
    }
}

@Suite("Users, randomized: every replica equals the rules applied to the server, no row outside a rule, ever")
struct UserConvergenceTests {
    static let users = ["u0", "u1", "u2", "u3"]
    static let teams = ["t0", "t1", "t2", "t3"]
    static let collections = ["members", "posts", "docs"]

    /// How many random selections each user reads per run (DELTASNAP_USER_SELECTIONS; Scripts/reliability.sh asks for 10,000).
    static let selections = ProcessInfo.processInfo.environment["DELTASNAP_USER_SELECTIONS"].flatMap { Int($0) } ?? 200

    /// One random owner write: memberships added, moved, hidden; posts moved between teams; docs shared and unshared.
    static func write(_ random: inout SeededGenerator, _ client: some TestClientProtocol) async throws {
        let id = "\(Int.random(in: 0..<12, using: &random))"
        let user = users.randomElement(using: &random)!
        let team = teams.randomElement(using: &random)!
        let n = Int.random(in: 0..<5, using: &random)
        switch Int.random(in: 0..<7, using: &random) {
        case 0: _ = try await client.write(.put, "/api/members/m\(id)", #"{"id":"m\#(id)","team":"\#(team)","user":"\#(user)"}"#)
        case 1: _ = try await client.execute(uri: "/api/members/m\(id)", method: .delete, headers: [.authorization: "Bearer \(secret)"])
        case 2, 3: _ = try await client.write(.put, "/api/posts/p\(id)", #"{"id":"p\#(id)","n":\#(n),"team":"\#(team)"}"#)
        case 4: _ = try await client.execute(uri: "/api/posts/p\(id)", method: .delete, headers: [.authorization: "Bearer \(secret)"])
        case 5:
            let editors = users.filter { _ in Bool.random(using: &random) }.map { #""\#($0)""# }.joined(separator: ",")
            _ = try await client.write(.put, "/api/docs/d\(id)", #"{"editors":[\#(editors)],"id":"d\#(id)","n":\#(n),"owner":"\#(user)"}"#)
        default: _ = try await client.execute(uri: "/api/docs/d\(id)", method: .delete, headers: [.authorization: "Bearer \(secret)"])
        }
    }

    /// The server's visible records, read by the owner.
    static func state(_ client: some TestClientProtocol) async throws -> [String: [String: JSONValue]] {
        var state: [String: [String: JSONValue]] = [:]
        for collection in collections {
            let response = try await client.get("/api/\(collection)", as: secret)
            guard case .object(let members) = try JSONValue(parsing: response.bytes), case .array(let items) = members.first?.value else { continue }
            for item in items { if case .string(let id)? = item["id"] { state[collection, default: [:]][id] = item } }
        }
        return state
    }

    @Test(
        "Writers add and remove memberships and sharing entries and move rows in and out of rules; users sync after every round", arguments: Backend.available)
    func randomized(backend: Backend) async throws {
        let seed = SeededGenerator.seed(for: "UserConvergenceTests.randomized(\(backend))")
        try await withUserServer(backend: backend, rules: UserRulesTests.rules) { client, store in
            var random = SeededGenerator(seed: seed)
            _ = try await client.write(.put, "/api/members/m0", #"{"id":"m0","team":"t0","user":"u0"}"#)
            _ = try await client.write(.put, "/api/posts/p0", #"{"id":"p0","n":0,"team":"t0"}"#)
            _ = try await client.write(.put, "/api/docs/d0", #"{"editors":[],"id":"d0","n":0,"owner":"u1"}"#)
            var tokens: [String: String] = [:]
            for user in Self.users { tokens[user] = try await Mint.hs256(user) }
            var replicas: [String: ModelReplica] = [:]
            var limited: [String: ModelReplica] = [:]  // posts, limit=2
            var answers = 0
            var pushes: [String: UInt64] = [:]
            for round in 0..<30 {
                for _ in 0..<Int.random(in: 1...4, using: &random) { try await Self.write(&random, client) }
                answers += try await Self.push(&random, client, store, tokens, &pushes, seed: seed)
                let reference = ReferenceRules(state: try await Self.state(client))
                for user in Self.users {
                    let token = tokens[user]!
                    for collection in Self.collections {
                        var replica = replicas["\(user)/\(collection)"] ?? ModelReplica()
                        let response = try await UserRulesTests.sync(client, "/api/\(collection)", token, &replica)
                        answers += 1
                        let expected = reference.visible(collection, to: user).mapValues { String(decoding: $0.canonicalBytes, as: UTF8.self) }
                        #expect(try Self.outside(response, expected).isEmpty, "seed \(seed) round \(round): \(user) got rows outside the rule in \(collection)")
                        #expect(replica.records == expected, "seed \(seed) round \(round): \(user)'s \(collection)")
                        #expect(replica.resets == 0, "seed \(seed): \(user)'s \(collection) reset")
                        replicas["\(user)/\(collection)"] = replica
                    }
                    var window = limited[user] ?? ModelReplica()
                    _ = try await UserRulesTests.sync(client, "/api/posts?limit=2", token, &window)
                    let firstThree = reference.visible("posts", to: user).sorted { $0.key.utf8.lexicographicallyPrecedes($1.key.utf8) }.prefix(2)
                    #expect(
                        window.records
                            == Dictionary(uniqueKeysWithValues: firstThree.map { ($0.key, String(decoding: $0.value.canonicalBytes, as: UTF8.self)) }),
                        "seed \(seed) round \(round): \(user)'s first two posts")
                    limited[user] = window
                }
            }
            // Random selections, full and limited: no answer holds a row outside the user's rule.
            let reference = ReferenceRules(state: try await Self.state(client))
            for user in Self.users {
                for _ in 0..<Self.selections {
                    let collection = ["posts", "docs"].randomElement(using: &random)!
                    var query =
                        "filter=" + #"{"n":{"\#(["eq", "lt", "gte", "ne"].randomElement(using: &random)!)":\#(Int.random(in: 0..<5, using: &random))}}"#
                        .addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
                    if Bool.random(using: &random) { query += "&limit=\(Int.random(in: 1...4, using: &random))" }
                    let response = try await client.get("/api/\(collection)?\(query)", as: tokens[user]!)
                    let allowed = reference.visible(collection, to: user).mapValues { String(decoding: $0.canonicalBytes, as: UTF8.self) }
                    #expect(try Self.outside(response, allowed).isEmpty, "seed \(seed): \(user) \(collection)?\(query)")
                    answers += 1
                }
            }
            print("UserConvergenceTests.randomized: seed \(seed), \(answers) answers checked on \(backend)")
        }
    }

    /// One user's random push to posts or docs: each mutation is denied exactly when the
    /// reference rules refuse it for the stored record (hidden or not) or the new one.
    static func push(
        _ random: inout SeededGenerator, _ client: some TestClientProtocol, _ store: any ChangeStore, _ tokens: [String: String],
        _ pushes: inout [String: UInt64], seed: UInt64
    ) async throws -> Int {
        let user = users.randomElement(using: &random)!
        let members = try await Self.state(client)["members"] ?? [:]
        let teams = members.values.filter { $0["user"] == .string(user) }.compactMap { $0["team"] }
        var mutations: [String] = []
        var expected: [Bool] = []
        var touched: Set<String> = []
        for _ in 0..<Int.random(in: 1...3, using: &random) {
            let collection = Bool.random(using: &random) ? "posts" : "docs"
            let id = (collection == "posts" ? "p" : "d") + "\(Int.random(in: 0..<12, using: &random))"
            guard touched.insert(collection + id).inserted else { continue }
            let stored = try await store.record(id, in: try CollectionName(collection)).map { try JSONValue(parsing: $0.record.body) }
            func allows(_ record: JSONValue) -> Bool {
                if collection == "posts" { return record["team"].map { teams.contains($0) } ?? false }
                if record["owner"] == .string(user) { return true }
                if case .array(let editors)? = record["editors"] { return editors.contains(.string(user)) }
                return false
            }
            let number = (pushes[user] ?? 0) + UInt64(mutations.count) + 1
            if Int.random(in: 0..<4, using: &random) == 0 {
                mutations.append(#"{"id":\#(number),"collection":"\#(collection)","op":"delete","recordId":"\#(id)","base":null}"#)
                expected.append(stored.map(allows) ?? true)
            } else {
                let body =
                    collection == "posts"
                    ? #"{"id":"\#(id)","n":\#(Int.random(in: 0..<5, using: &random)),"team":"\#(teams.randomElement(using: &random).flatMap { if case .string(let t) = $0 { t } else { nil } } ?? "t0")"}"#
                    : #"{"editors":["\#(users.randomElement(using: &random)!)"],"id":"\#(id)","n":1,"owner":"\#(users.randomElement(using: &random)!)"}"#
                mutations.append(#"{"id":\#(number),"collection":"\#(collection)","op":"put","record":\#(body),"base":null}"#)
                let proposed = try JSONValue(parsing: Array(body.utf8))
                expected.append((stored.map(allows) ?? true) && allows(proposed))
            }
        }
        let answer = try await client.write(
            .post, "/push", pushBody(mutations.joined(separator: ","), client: "\(user)-device"), auth: "Bearer \(tokens[user]!)")
        #expect(answer.status == .ok, "seed \(seed): \(answer.text)")
        guard case .array(let results)? = try JSONValue(parsing: answer.bytes)["results"] else { return 0 }
        for (result, allowed) in zip(results, expected) {
            let denied = result["status"] == .string("denied")
            #expect(denied == !allowed, "seed \(seed): \(user) pushed \(mutations) and got \(answer.text)")
        }
        pushes[user] = (pushes[user] ?? 0) + UInt64(mutations.count)
        return 1
    }

    /// The visible records of an answer that the rule does not give (id, or the body when it differs).
    static func outside(_ response: TestResponse, _ allowed: [String: String]) throws -> [String] {
        guard response.status == .ok else { return [] }
        guard case .object(let members) = try JSONValue(parsing: response.bytes), case .array(let items) = members.first?.value else { return ["?"] }
        return try items.compactMap { item in
            let record = try Record(value: item)
            guard !record.hidden else { return nil }
            return allowed[record.id] == String(decoding: record.body, as: UTF8.self) ? nil : record.id
        }
    }
}

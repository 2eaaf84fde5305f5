import DeltaCore
import DeltaRules
import DeltaStore
import DeltaTestSupport
import Foundation
import Testing

@Suite("Push on the store: exactly once across instances")
struct PushTests {
    @Test("The same client's push sent at once through several instances applies each mutation once", arguments: Backend.available)
    func concurrentPushesApplyOnce(backend: Backend) async throws {
        let directory = URL(fileURLWithPath: try makeTemporaryDirectory("push"))
        defer { try? FileManager.default.removeItem(at: directory) }
        let database = try await backend.makeDatabase(in: directory)
        // PostgreSQL: three instances, as three servers would have; SQLite: one process, one instance.
        var instances: [any ChangeStore] = [try await database.open()]
        for _ in 1..<3 { instances.append(backend == .sqlite ? instances[0] : try await database.open()) }
        let stores = instances
        let notes = try CollectionName("notes")
        // 40 mutations of one record, each a new version: applied twice, one would take a second position.
        let mutations = try (1...40).map { index in
            Mutation(id: UInt64(index), collection: notes, put: try Record(parsing: Array(#"{"id":"r","v":\#(index)}"#.utf8)), base: nil)
        }
        let request = PushRequest(client: "app-1", mutations: mutations)
        let answers = try await withThrowingTaskGroup(of: PushResponse.self) { group in
            for round in 0..<6 {
                group.addTask { try await Push.apply(request, to: stores[round % stores.count]) }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(Set(answers.map { $0.json.canonicalBytes }).count == 1)
        #expect(answers.first?.lastMutationID == 40)
        #expect(answers.first?.results.allSatisfy { $0.status == .applied } == true)
        #expect(try await stores[0].headPosition() == 40)
        #expect(try await stores[0].record("r", in: notes)?.record.body == Array(#"{"id":"r","v":40}"#.utf8))
        #expect(try await stores[0].read(notes, since: .nothing, client: "app-1").lastMutation == 40)
        for store in Set(stores.map { ObjectIdentifier($0 as AnyObject) }).compactMap({ id in stores.first { ObjectIdentifier($0 as AnyObject) == id } }) {
            try await store.close()
        }
        await database.remove()
    }

    @Test("A client id belongs to the principal that first pushed with it: any other's push, a repeat included, is clientOwned", arguments: Backend.available)
    func clientOwnedByFirstPrincipal(backend: Backend) async throws {
        try await backend.withStore { store, _ in
            let notes = try CollectionName("notes")
            func request(_ id: UInt64, _ record: String) throws -> PushRequest {
                PushRequest(client: "install-1", mutations: [Mutation(id: id, collection: notes, put: try Record(parsing: Array(record.utf8)), base: nil)])
            }
            let first = try request(1, #"{"id":"a"}"#)
            #expect(try await Push.apply(first, to: store, as: .clientKey(rules: nil, writable: ["notes"])).lastMutationID == 1)
            #expect(try await store.owner(ofClient: "install-1") == Principal.clientKeyName)
            // The owner's secret neither hears the client key's recorded answer nor pushes on.
            let replayed = await #expect(throws: StoreError.self) { try await Push.apply(first, to: store, as: .owner) }
            #expect(replayed?.kind == .clientOwned)
            let next = await #expect(throws: StoreError.self) { try await Push.apply(try request(2, #"{"id":"b"}"#), to: store, as: .owner) }
            #expect(next?.kind == .clientOwned)
            #expect(try await store.record("b", in: notes) == nil)
            #expect(try await Push.apply(try request(2, #"{"id":"b"}"#), to: store, as: .clientKey(rules: nil, writable: ["notes"])).lastMutationID == 2)
        }
    }

    @Test(
        "A mutation in a collection the pusher may not write is denied (rule collection) and recorded; those after it apply: nothing wedges",
        arguments: Backend.available)
    func unwritableCollectionIsDenied(backend: Backend) async throws {
        try await backend.withStore { store, _ in
            let notes = try CollectionName("notes")
            let products = try CollectionName("products")
            let key = Principal.clientKey(rules: nil, writable: ["notes"])
            let mutations = [
                Mutation(id: 1, collection: products, put: try Record(parsing: Array(#"{"id":"p1","price":0}"#.utf8)), base: nil),
                Mutation(id: 2, collection: notes, put: try Record(parsing: Array(#"{"id":"n1"}"#.utf8)), base: nil),
            ]
            let request = PushRequest(client: "phone", mutations: mutations)
            let answer = try await Push.apply(request, to: store, as: key)
            #expect(
                String(decoding: answer.json.canonicalBytes, as: UTF8.self)
                    == #"{"lastMutationId":2,"results":[{"id":1,"rule":"collection","server":null,"status":"denied"},{"id":2,"status":"applied"}]}"#)
            #expect(try await store.record("p1", in: products) == nil)
            #expect(try await store.record("n1", in: notes) != nil)
            // The same push again hears the same answers, from the record.
            #expect(try await Push.apply(request, to: store, as: key) == answer)
            // A user whose rules do not name the collection: the same, whatever is stored there.
            let rules = try Rules(parsing: Array(#"{"collections":{"notes":{"read":true,"write":true}}}"#.utf8))
            let version = try await store.installRules(rules)
            let ada = Principal.user(UserWrite(claims: try Claims(parsing: #"{"sub":"ada"}"#), rules: rules, rulesVersion: version))
            let denied = try await Push.apply(PushRequest(client: "ada-phone", mutations: [mutations[0]]), to: store, as: ada)
            #expect(
                String(decoding: denied.json.canonicalBytes, as: UTF8.self)
                    == #"{"lastMutationId":1,"results":[{"id":1,"rule":"collection","server":null,"status":"denied"}]}"#)
            // Newer rules give writes to products: a user still pinned to the old ones is not
            // answered (nothing is recorded) but told the rules changed, to decide again.
            let newer = try Rules(parsing: Array(#"{"collections":{"notes":{"read":true,"write":true},"products":{"read":true,"write":true}}}"#.utf8))
            let newVersion = try await store.installRules(newer)
            let second = PushRequest(
                client: "ada-phone", mutations: [Mutation(id: 2, collection: products, put: try Record(parsing: Array(#"{"id":"p2"}"#.utf8)), base: nil)])
            let stale = await #expect(throws: StoreError.self) { try await Push.apply(second, to: store, as: ada) }
            #expect(stale?.kind == .rulesMismatch)
            let current = Principal.user(UserWrite(claims: try Claims(parsing: #"{"sub":"ada"}"#), rules: newer, rulesVersion: newVersion))
            #expect(try await Push.apply(second, to: store, as: current).results.map(\.status) == [.applied])
        }
    }

    @Test(
        "Client ids from before principals were recorded: a user's stays theirs; one without stays open to the owner and the client key, closed to users",
        arguments: Backend.available)
    func legacyClientOwners(backend: Backend) async throws {
        try await backend.withDatabase { database, store, _ in
            let notes = try CollectionName("notes")
            let rules = try Rules(parsing: Array(#"{"collections":{"notes":{"read":true,"write":true}}}"#.utf8))
            let version = try await store.installRules(rules)
            let ada = Principal.user(UserWrite(claims: try Claims(parsing: #"{"sub":"ada"}"#), rules: rules, rulesVersion: version))
            func push(_ client: String, _ id: UInt64, as principal: Principal) async throws -> PushResponse {
                let record = try Record(parsing: Array(#"{"id":"\#(client)-\#(id)"}"#.utf8))
                let request = PushRequest(client: client, mutations: [Mutation(id: id, collection: notes, put: record, base: nil)])
                return try await Push.apply(request, to: store, as: principal)
            }
            _ = try await push("old-app", 1, as: .clientKey(rules: nil, writable: ["notes"]))
            try await database.execute(
                "DELETE FROM client_principals WHERE client = 'old-app'", #"INSERT INTO client_owners(client, "user") VALUES ('old-phone', 'ada')"#)
            #expect(try await store.owner(ofClient: "old-phone") == Principal.userName("ada"))
            #expect(try await store.owner(ofClient: "old-app") == nil)
            #expect(try await push("old-app", 2, as: .owner).lastMutationID == 2)
            #expect(try await push("old-app", 3, as: .clientKey(rules: nil, writable: ["notes"])).lastMutationID == 3)
            let refused = await #expect(throws: StoreError.self) { try await push("old-app", 4, as: ada) }
            #expect(refused?.kind == .clientOwned)
            #expect(try await push("old-phone", 1, as: ada).lastMutationID == 1)
        }
    }

    @Test(
        "create decides only ids never stored: another user's put over a hidden row is denied by write; its owner sees only that it is hidden",
        arguments: Backend.available)
    func createIsNotOverHidden(backend: Backend) async throws {
        try await backend.withStore { store, _ in
            let drafts = try CollectionName("drafts")
            let text = #"""
                {"collections": {"drafts": {"read":   {"owner": {"eq": {"$claim": "sub"}}},
                                            "write":  {"owner": {"eq": {"$claim": "sub"}}},
                                            "create": true,
                                            "stamp":  {"owner": {"$claim": "sub"}}}}}
                """#
            let rules = try Rules(parsing: Array(text.utf8))
            let version = try await store.installRules(rules)
            func user(_ subject: String) throws -> Principal {
                .user(UserWrite(claims: try Claims(parsing: #"{"sub":"\#(subject)"}"#), rules: rules, rulesVersion: version))
            }
            func put(_ client: String, _ id: UInt64, _ record: String, base: String? = nil, create: Bool = false) throws -> PushRequest {
                PushRequest(
                    client: client, mutations: [Mutation(id: id, collection: drafts, put: try Record(parsing: Array(record.utf8)), base: base, create: create)])
            }
            let secret = #"{"hidden":true,"id":"d1","owner":"bob","text":"secret"}"#
            _ = try await store.write(to: drafts) { try await $0.upsert(try Record(parsing: Array(secret.utf8))) }
            let taken = try await Push.apply(try put("ada-1", 1, #"{"id":"d1","text":"mine"}"#, create: true), to: store, as: try user("ada"))
            #expect(taken.results == [MutationResult(id: 1, status: .denied, rule: "write")])
            #expect(try await store.record("d1", in: drafts)?.record == (try Record(parsing: Array(secret.utf8))))
            let restore = try await Push.apply(try put("bob-1", 1, #"{"id":"d1","text":"back"}"#), to: store, as: try user("bob"))
            let conflict = try #require(restore.results.first)
            #expect(conflict.status == .conflict && conflict.reason == "hidden")
            #expect(conflict.server?.wireJSON == Array(#"{"hidden":true,"id":"d1"}"#.utf8))
            let resolved = try await Push.apply(try put("bob-1", 2, #"{"id":"d1","text":"back"}"#, base: conflict.base), to: store, as: try user("bob"))
            #expect(resolved.results.map(\.status) == [.applied])
        }
    }

    @Test("Groups: one commit per run of one collection, split where a record repeats")
    func grouping() throws {
        let a = try CollectionName("a")
        let b = try CollectionName("b")
        func put(_ id: UInt64, _ collection: CollectionName, _ record: String) throws -> Mutation {
            Mutation(id: id, collection: collection, put: try Record(parsing: Array(#"{"id":"\#(record)"}"#.utf8)), base: nil)
        }
        let mutations = try [put(1, a, "x"), put(2, a, "y"), put(3, a, "x"), put(4, b, "x"), put(5, b, "z"), put(6, a, "q")]
        #expect(Push.groups(mutations).map { $0.map(\.id) } == [[1, 2], [3], [4, 5], [6]])
    }

    @Test(
        "A repeated push shows a recorded conflict's server record only to a user who may still read it: after their access ends, it answers denied (rule read), nothing of the record",
        arguments: Backend.available)
    func replayShowsOnlyWhatIsReadableNow(backend: Backend) async throws {
        try await backend.withStore { store, _ in
            let posts = try CollectionName("posts")
            let rule = #"{"team":{"eq":{"$claim":"team"}}}"#
            let rules = try Rules(parsing: Array(#"{"collections":{"posts":{"read":\#(rule),"write":\#(rule)}}}"#.utf8))
            let version = try await store.installRules(rules)
            func ada(_ team: String) throws -> Principal {
                .user(UserWrite(claims: try Claims(parsing: #"{"sub":"ada","team":"\#(team)"}"#), rules: rules, rulesVersion: version))
            }
            let first = try await store.write(to: posts) { try await $0.upsert(try record(#"{"id":"p","team":"red","text":"v1"}"#)) }.commit
            _ = try await store.write(to: posts) { try await $0.upsert(try record(#"{"id":"p","team":"red","text":"v2, secret"}"#)) }
            // Ada edits v1 while Bob wrote v2: a conflict that shows her v2.
            let edit = Mutation(id: 1, collection: posts, put: try record(#"{"id":"p","team":"red","text":"mine"}"#), base: first.token.entityTag)
            let request = PushRequest(client: "ada-phone", mutations: [edit])
            let answer = try await Push.apply(request, to: store, as: try ada("red"))
            #expect(answer.results.map(\.status) == [.conflict])
            #expect(answer.results.first?.server.map { String(decoding: $0.body, as: UTF8.self) }?.contains("secret") == true)
            // Still on the team: the same answer, byte for byte.
            #expect(try await Push.apply(request, to: store, as: try ada("red")) == answer)
            // Moved to another team, her app repeats the push (its answer was lost): nothing of v2.
            let moved = try await Push.apply(request, to: store, as: try ada("blue"))
            #expect(
                String(decoding: moved.json.canonicalBytes, as: UTF8.self)
                    == #"{"lastMutationId":1,"results":[{"id":1,"rule":"read","server":null,"status":"denied"}]}"#)
            // Back on the team: the recorded answer again.
            #expect(try await Push.apply(request, to: store, as: try ada("red")) == answer)
            // The row hidden since: no more of it than a read now gives, its bare tombstone.
            _ = try await store.write(to: posts) { _ = try await $0.hide(id: "p") }
            let sinceHidden = try await Push.apply(request, to: store, as: try ada("red"))
            #expect(
                String(decoding: sinceHidden.json.canonicalBytes, as: UTF8.self).contains(#""server":{"hidden":true,"id":"p"},"status":"conflict""#),
                "\(String(decoding: sinceHidden.json.canonicalBytes, as: UTF8.self))")
            // Moved to another team since: the row is no longer hers to read, whatever the recorded version says.
            _ = try await store.write(to: posts) { try await $0.upsert(try record(#"{"id":"p","team":"blue","text":"v3"}"#)) }
            #expect(try await Push.apply(request, to: store, as: try ada("red")).results.map(\.status) == [.denied])

            // A conflict over a hidden record shows a bare tombstone: repeated, it is the same
            // answer while her team's rule matches the row (the tombstone has no team to judge).
            let before = try await store.write(to: posts) { try await $0.upsert(try record(#"{"id":"q","team":"red","text":"q1"}"#)) }.commit
            _ = try await store.write(to: posts) { _ = try await $0.hide(id: "q") }
            let hiddenEdit = Mutation(id: 2, collection: posts, put: try record(#"{"id":"q","team":"red","text":"mine"}"#), base: before.token.entityTag)
            let second = PushRequest(client: "ada-phone", mutations: [hiddenEdit])
            let overHidden = try await Push.apply(second, to: store, as: try ada("red"))
            #expect(
                String(decoding: overHidden.json.canonicalBytes, as: UTF8.self).contains(#""server":{"hidden":true,"id":"q"},"status":"conflict""#),
                "\(String(decoding: overHidden.json.canonicalBytes, as: UTF8.self))")
            #expect(try await Push.apply(second, to: store, as: try ada("red")) == overHidden)
            #expect(try await Push.apply(second, to: store, as: try ada("blue")).results.map(\.status) == [.denied])
        }
    }
}

import DeltaCore
import DeltaRules
import DeltaSQLite
import DeltaTestSupport
import Foundation
import Testing

@testable import DeltaPostgres
@testable import DeltaSQLiteStore
@testable import DeltaStore

@Suite("A $rows source read through an index on its key member")
struct RowsKeyTests {
    static let teams = try! Rules(
        parsing: Array(
            #"""
            {"collections": {
              "posts": {"read": {"team": {"in": {"$rows": {"collection": "members", "where": {"and": [{"not": {"role": {"eq": "left"}}}, {"user": {"eq": {"$claim": "sub"}}}]}, "member": "team"}}}}},
              "members": {"read": {"user": {"eq": {"$claim": "sub"}}}}}}
            """#.utf8))
    static let open = try! Rules(parsing: Array(#"{"collections": {"posts": {"read": true}, "members": {"read": true}}}"#.utf8))

    /// The values the `posts` rule gives `user`, now and at `position`, in one rule read.
    func teams(_ store: any ChangeStore, _ user: String, at position: UInt64?) async throws -> Filter {
        let (start, _) = try await store.openRuleRead(name("posts"), since: .nothing, client: nil)
        guard case .source(let source, _) = start, case .when(let filter)? = Self.teams.rule(for: name("posts"))?.read else {
            throw TestFailure("no rule read")
        }
        defer { source.close() }
        return try await source.resolve(filter, for: try Claims(parsing: #"{"sub":"\#(user)"}"#), at: position)
    }

    /// The key indexes the database has, and the plan of a keyed read of ada's memberships.
    func indexesAndPlan(_ database: TestDatabase, _ store: any ChangeStore) async throws -> (indexes: [String], plan: String) {
        let key = RowsKey(member: "user", value: "ada")
        if let sqlite = store as? SQLiteStore {
            let indexes = try await database.lines("SELECT name FROM sqlite_master WHERE type = 'index' AND name LIKE 'rules_key_%'")
            guard let sql = sqlite.keyedBodiesSQL(name("members"), key, at: nil) else { return (indexes, "") }
            let explain = try Connection(path: database.location, mode: .readOnly).statement("EXPLAIN QUERY PLAN " + sql)
            try explain.bind([.text("ada")])
            var plan = ""
            while try explain.step() { plan += explain.string(3) + "\n" }
            return (indexes, plan)
        }
        let postgres = try #require(store as? PostgresStore)
        let indexes = try await database.lines("SELECT indexname::text FROM pg_indexes WHERE indexname LIKE 'rules_key_%'")
        guard let sql = postgres.keyedBodiesSQL(name("members"), key, at: nil) else { return (indexes, "") }
        let plan = try await database.lines("EXPLAIN " + sql.replacingOccurrences(of: "$1", with: "'ada'")).joined(separator: "\n")
        return (indexes, plan)
    }

    @Test(
        "The index is made with the rules and dropped with them; reads through it give what a scan gives, now and at an older position",
        arguments: Backend.available)
    func keyed(backend: Backend) async throws {
        try await backend.withDatabase { database, store, _ in
            // 300 rows of other users (one named like ada's team, one whose user is an array), then
            // ada's, and bea's, whose body PostgreSQL's JSON refuses to read (`\u0000`).
            let others = (0..<300).map { #"{"id":"o\#($0)","user":"u\#($0)","team":"t\#($0 % 7)"}"# }
            _ = try await store.write(to: name("members")) { transaction in
                for text in others { try await transaction.upsert(try record(text)) }
                try await transaction.upsert(try record(#"{"id":"x1","user":["ada"],"team":"t-array"}"#))
                try await transaction.upsert(try record(#"{"id":"x2","user":"ada ","team":"t-space"}"#))
            }
            try await put(store, "members", #"{"id":"a1","user":"ada","team":"t1"}"#, #"{"id":"a2","user":"ada","team":"t2","role":"lead"}"#)
            _ = try await store.installRules(Self.teams)
            try await put(store, "members", #"{"id":"b1","user":"bea","team":"t9","note":"nul \u0000 here"}"#)
            let (indexes, plan) = try await indexesAndPlan(database, store)
            let indexName = RowsKey.indexName(name("members"), "user")
            #expect(indexes == [store is PostgresStore ? PostgresStore.keyIndexName(indexName) : indexName])
            #expect(plan.contains(RowsKey.indexName(name("members"), "user")), "plan: \(plan)")

            // The store's readers keep their statements' plans whatever is bound (FixedPlanTests).
            if let sqlite = store as? SQLiteStore {
                let reader = try await sqlite.readers.checkout()
                for collection in ["members", "posts", "members"] {
                    let statement = try reader.statement("SELECT count(*) FROM records WHERE collection = ?1")
                    try statement.bind([.text(collection)])
                    _ = try statement.step()
                    statement.reset()
                }
                #expect(try reader.statement("SELECT count(*) FROM records WHERE collection = ?1").reprepares == 0)
                sqlite.readers.checkin(reader)
            }

            let before = try await put(store, "posts", #"{"id":"p","team":"t1"}"#).token.position
            let first = try await teams(store, "ada", at: nil)
            #expect(first == .oneOf(member: "team", [.string("t1"), .string("t2")]), "\(first)")
            #expect(try await teams(store, "bea", at: nil) == .oneOf(member: "team", [.string("t9")]))
            // A key of 4,000 letters that do not compress is stored (PostgreSQL's index holds its
            // start: a B-tree entry holds at most 2,704 bytes) and read exactly; another with the
            // same start and another end reads nothing of it.
            var state: UInt64 = 42
            let long = String(
                (0..<4_000).map { _ in
                    state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
                    return Character(UnicodeScalar(UInt8(97 + (state >> 33) % 26)))
                })
            try await put(store, "members", #"{"id":"l1","user":"\#(long)","team":"t-long"}"#)
            #expect(try await teams(store, long, at: nil) == .oneOf(member: "team", [.string("t-long")]))
            #expect(try await teams(store, long + "x", at: nil) == .oneOf(member: "team", []))
            // Ada leaves t1 (edited), t2 is hidden, she joins t3: now t3 alone, at the older position t1 and t2.
            try await put(store, "members", #"{"id":"a1","user":"ada","team":"t1","role":"left"}"#, #"{"id":"a3","user":"ada","team":"t3"}"#)
            _ = try await store.write(to: name("members")) { _ = try await $0.hide(id: "a2") }
            #expect(try await teams(store, "ada", at: nil) == .oneOf(member: "team", [.string("t3")]))
            #expect(try await teams(store, "ada", at: before) == .oneOf(member: "team", [.string("t1"), .string("t2")]))
            #expect(try await teams(store, "u5", at: nil) == .oneOf(member: "team", [.string("t5")]))
            #expect(try await teams(store, "nobody", at: nil) == .oneOf(member: "team", []))

            _ = try await store.installRules(Self.open)
            #expect(try await indexesAndPlan(database, store).indexes.isEmpty)
        }
    }

    @Test("The key is the filter's required equality with a claim or a string, on a plain member name")
    func keyMember() throws {
        func source(_ whereText: String) throws -> RowsSource {
            let rules = try Rules(
                parsing: Array(
                    #"{"collections": {"posts": {"read": {"team": {"in": {"$rows": {"collection": "members", "where": \#(whereText), "member": "team"}}}}}}}"#
                        .utf8))
            guard case .when(let filter)? = rules.rule(for: name("posts"))?.read, let source = filter.sources.first else { throw TestFailure("no source") }
            return source
        }
        let ada = try Claims(parsing: #"{"sub":"ada","level":3}"#)
        #expect(try source(#"{"user": {"eq": {"$claim": "sub"}}}"#).key(for: ada) == RowsKey(member: "user", value: "ada"))
        #expect(try source(#"{"and": [{"x": {"gt": 1}}, {"org": {"eq": "acme"}}]}"#).key(for: ada) == RowsKey(member: "org", value: "acme"))
        #expect(try source(#"{"level": {"eq": {"$claim": "level"}}}"#).key(for: ada) == nil)  // a number: read in full
        #expect(try source(#"{"or": [{"user": {"eq": {"$claim": "sub"}}}, {"public": {"eq": true}}]}"#).keyMember == nil)
        #expect(try source(#"{"user name": {"eq": {"$claim": "sub"}}}"#).keyMember == nil)
        #expect(try source(#"{"user": {"eq": {"$claim": "missing"}}}"#).key(for: ada) == nil)
    }
}

@Suite("Query plans independent of bound values (SQLite)")
struct FixedPlanTests {
    @Test("With a partial index on records, a store's cached statement is not prepared again at each new binding; without fixed plans it is")
    func noReprepare() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("fixed-plans-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("plans.sqlite").path
        let setup = try Connection(path: path)
        try setup.execute(
            """
            CREATE TABLE records(collection TEXT NOT NULL, id TEXT NOT NULL, body BLOB NOT NULL, PRIMARY KEY (collection, id)) WITHOUT ROWID;
            CREATE INDEX keyed ON records(json_extract(body, '$.user')) WHERE collection = 'members';
            INSERT INTO records VALUES ('members', 'm', '{"user":"ada"}'), ('posts', 'p', '{}');
            """)
        func reprepares(fixed: Bool) throws -> Int32 {
            let connection = try Connection(path: path)
            if fixed { try connection.fixPlans() }
            for collection in ["members", "posts", "members", "posts"] {
                let statement = try connection.statement("SELECT count(*) FROM records WHERE collection = ?1")
                try statement.bind([.text(collection)])
                _ = try statement.step()
                statement.reset()
            }
            return try connection.statement("SELECT count(*) FROM records WHERE collection = ?1").reprepares
        }
        #expect(try reprepares(fixed: false) > 0)  // what the store avoids
        #expect(try reprepares(fixed: true) == 0)
    }
}

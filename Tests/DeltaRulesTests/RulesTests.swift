import DeltaCore
import DeltaTestSupport
import Foundation
import Testing

@testable import DeltaRules

@Suite("Rules: the file, its filters, claims and stamps")
struct RulesTests {
    /// The form docs/PROTOCOL.md documents (issue 21's example).
    static let example = exampleRules

    func value(_ text: String) throws -> JSONValue { try JSONValue(parsing: Array(text.utf8)) }

    @Test("The documented example parses; unnamed collections have no rule; the digest ignores white space and key order")
    func example() throws {
        let rules = try Rules(parsing: Array(Self.example.utf8))
        #expect(rules.isPublic(try CollectionName("airports")))
        #expect(!rules.isPublic(try CollectionName("notes")))
        #expect(rules.rule(for: try CollectionName("secrets")) == nil)
        #expect(rules.collections["notes"]?.stamp.map(\.member) == ["owner"])
        #expect(
            rules.collections["posts"].map { rule -> [String] in
                guard case .when(let filter) = rule.read else { return [] }
                return filter.sources.map(\.collection.rawValue)
            } == ["members"])
        let compact = try Rules(json: try value(Self.example))
        #expect(compact.digest == rules.digest)
        let other = try Rules(parsing: Array(#"{"collections":{"airports":{"read":false}}}"#.utf8))
        #expect(other.digest != rules.digest)
    }

    @Test(
        "Errors name the place in the file as a JSON Pointer",
        arguments: [
            (#"{"collections":{"notes":{"read":{"owner":{"like":"x"}}}}}"#, "/collections/notes/read/owner/like"),
            (#"{"collections":{"notes":{"raed":true}}}"#, "/collections/notes"),
            (#"{"collections":{"notes":{"read":{"or":[{"a":{"eq":1}},{"b":{"eq":{"$claim":""}}}]}}}}"#, "/collections/notes/read/or/1/b/eq/$claim"),
            (
                #"{"collections":{"p":{"read":{"t":{"in":{"$rows":{"collection":"m","where":{"u":{"in":{"$rows":{}}}},"member":"t"}}}}}}}"#,
                "/collections/p/read/t/in/$rows/where/u/in"
            ),
            (#"{"collections":{"p":{"read":{"t":{"eq":{"$rows":{"collection":"m","where":{},"member":"t"}}}}}}}"#, "/collections/p/read/t/eq"),
            (#"{"collections":{"n":{"stamp":{"id":{"$claim":"sub"}}}}}"#, "/collections/n/stamp/id"),
            (#"{"collections":{"bad name":{"read":true}}}"#, "/collections/bad name"),
        ])
    func errors(text: String, pointer: String) throws {
        do {
            _ = try Rules(parsing: Array(text.utf8))
            Issue.record("accepted \(text)")
        } catch let error as WireError {
            #expect(error.kind == .rules)
            #expect(error.pointer == pointer, "\(error)")
            #expect(error.description.hasPrefix("rules: "))
        }
    }

    @Test("has: the member is an array holding the value; in the server's matcher and the replica's parser alike")
    func has() throws {
        let filter = try Filter(parsing: #"{"editors":{"has":"ada"}}"#)
        for (body, expected) in [
            (#"{"editors":["bob","ada"],"id":"1"}"#, true), (#"{"editors":["bob"],"id":"1"}"#, false), (#"{"editors":"ada","id":"1"}"#, false),
            (#"{"id":"1"}"#, false), (#"{"editors":[["ada"]],"id":"1"}"#, false),
        ] {
            #expect(filter.matches(try value(body)) == expected, "\(body)")
            #expect(FilterMatcher(filter).matches(body: Array(body.utf8)) == expected, "\(body)")
        }
        #expect(try Filter(parsing: #"{"n":{"has":1}}"#).matches(try value(#"{"id":"1","n":[1.0]}"#)))
        #expect(throws: WireError.self) { try Filter(parsing: #"{"n":{"has":[1]}}"#) }
        #expect(String(decoding: filter.json.canonicalBytes, as: UTF8.self) == #"{"editors":{"has":"ada"}}"#)
    }

    @Test("Resolving: claims fill values, $rows gives the member's values of matching rows, a missing claim allows nothing")
    func resolve() throws {
        let rules = try Rules(parsing: Array(Self.example.utf8))
        guard case .when(let posts)? = rules.collections["posts"]?.read, case .when(let docs)? = rules.collections["docs"]?.read else {
            Issue.record("example rules")
            return
        }
        let ada = try Claims(parsing: #"{"sub":"ada","teams":["x"]}"#)
        let members = [#"{"id":"1","team":"red","user":"ada"}"#, #"{"id":"2","team":"blue","user":"bob"}"#, #"{"id":"3","team":["green","red"],"user":"ada"}"#]
        let source = try #require(posts.sources.first)
        #expect(source.values(members.map { Array($0.utf8) }, claims: ada) == [.string("green"), .string("red")])
        #expect(posts.resolve(ada) { _ in [] } == .oneOf(member: "team", []))  // no memberships: in [] matches nothing
        let filled = try #require(posts.resolve(ada) { $0.values(members.map { Array($0.utf8) }, claims: ada) })
        #expect(filled.matches(try value(#"{"id":"p","team":"red"}"#)))
        #expect(!filled.matches(try value(#"{"id":"p","team":"blue"}"#)))
        #expect(docs.resolve(ada) { _ in [] }?.matches(try value(#"{"editors":["ada"],"id":"d","owner":"bob"}"#)) == true)
        // A rule reading a claim the token lacks resolves to nothing at all (deny), even under "not".
        let negated = try RuleFilter(json: try value(#"{"not":{"team":{"eq":{"$claim":"team"}}}}"#))
        #expect(negated.resolve(ada) { _ in [] } == nil)
        #expect(try RuleFilter(json: try value(#"{"team":{"in":{"$claim":"teams"}}}"#)).resolve(ada) { _ in [] } == .oneOf(member: "team", [.string("x")]))
    }

    @Test("Writes: the rule holds for the stored record and the new one; overrides per operation; stamps overwrite what the app sent")
    func writes() throws {
        let rules = try Rules(
            parsing: Array(
                #"""
                {"collections":{"notes":{"read":{"owner":{"eq":{"$claim":"sub"}}},"write":{"owner":{"eq":{"$claim":"sub"}}},
                 "delete":false,"stamp":{"owner":{"$claim":"sub"}}}}}
                """#.utf8))
        let rule = try #require(rules.collections["notes"])
        let ada = try Claims(parsing: #"{"sub":"ada"}"#)
        let mine = try value(#"{"id":"n","owner":"ada"}"#)
        let bobs = try value(#"{"id":"n","owner":"bob"}"#)
        #expect(rule.allows(.create, stored: nil, proposed: mine, claims: ada) { _ in [] } == (true, "write"))
        #expect(rule.allows(.update, stored: bobs, proposed: mine, claims: ada) { _ in [] } == (false, "write"))
        #expect(rule.allows(.update, stored: mine, proposed: bobs, claims: ada) { _ in [] } == (false, "write"))
        #expect(rule.allows(.delete, stored: mine, proposed: nil, claims: ada) { _ in [] } == (false, "delete"))
        #expect(rule.stamping(bobs, claims: ada) == mine)
        #expect(rule.stamping(try value(#"{"id":"n"}"#), claims: ada) == mine)
        #expect(rule.stamping(mine, claims: try Claims(parsing: #"{"sub":"x","y":1}"#)) == (try value(#"{"id":"n","owner":"x"}"#)))
    }

    @Test("Claims need a non-empty string sub; a binding changes with the user and with the claims the rules read, not others")
    func claims() throws {
        #expect(throws: WireError.self) { try Claims(parsing: #"{"sub":""}"#) }
        #expect(throws: WireError.self) { try Claims(parsing: #"{"sub":1}"#) }
        #expect(throws: WireError.self) { try Claims(parsing: #"["sub"]"#) }
        let ada = try Claims(parsing: #"{"sub":"ada","teams":["red"],"exp":1}"#)
        let later = try Claims(parsing: #"{"sub":"ada","teams":["red"],"exp":2}"#)
        let moved = try Claims(parsing: #"{"sub":"ada","teams":["blue"],"exp":1}"#)
        let bob = try Claims(parsing: #"{"sub":"bob","teams":["red"],"exp":1}"#)
        #expect(ada.binding(reading: ["sub", "teams"]) == later.binding(reading: ["teams", "sub"]))
        #expect(ada.binding(reading: ["teams"]) != moved.binding(reading: ["teams"]))
        #expect(ada.binding(reading: ["sub"]) == moved.binding(reading: ["sub"]))
        #expect(ada.binding(reading: []) != bob.binding(reading: []))
        #expect(ada.binding(reading: []).utf8.count == 16)
    }

    @Test("A user's token round-trips through its entity tag; a tag with a bad user part is refused")
    func userToken() throws {
        let mark = SelectionMark(fingerprint: "0123456789abcdef", boundary: nil, digest: .empty, user: UserMark(binding: "fedcba9876543210", rulesVersion: 3))
        let token = Token(database: 7, position: 42, commit: 9, selection: mark)
        #expect(try Token(entityTag: token.entityTag) == token)
        #expect(token.entityTag.hasSuffix(".fedcba9876543210.3\""))
        for bad in [".FEDCBA9876543210.3\"", ".fedcba987654321.3\"", ".fedcba9876543210.03\"", ".fedcba9876543210.\""] {
            let text = String(token.entityTag.dropLast(".fedcba9876543210.3\"".count)) + bad
            #expect(throws: WireError.self) { try Token(entityTag: text) }
        }
    }
}

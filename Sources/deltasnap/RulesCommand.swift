import ArgumentParser
import DeltaCore
import DeltaRules
import DeltaStore
import Foundation

/// `deltasnap rules`: check a rules file, install it in a database, and explain what it lets one
/// user do to one record.
struct RulesCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "rules",
        abstract: "Check or install a rules file, or explain what it lets a user do with a record.",
        discussion: """
            A rules file says, per collection, which rows each user reads and writes \
            (docs/PROTOCOL.md, "Users and rules"). `deltasnap serve --rules FILE` enforces it; \
            `deltasnap rules install` changes the rules of running servers, which follow the \
            database's within a second.
            """,
        subcommands: [Check.self, Install.self, Explain.self]
    )

    /// `deltasnap rules check FILE`.
    struct Check: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Check a rules file; an error names the place in it (a JSON Pointer).",
            discussion: "Prints each collection with what its rules read, and whether everyone may read it. Exits 1 with the first error.")

        @Argument(help: ArgumentHelp("The rules file.", valueName: "file"))
        var file: String

        func run() throws {
            let rules = try RulesFile.read(file)
            print("\(file): \(rules.collections.count) collection(s), digest \(rules.digest)")
            for name in rules.collections.keys.sorted() {
                guard let rule = rules.collections[name] else { continue }
                var facts: [String] = [rule.read == .everyone ? "public" : rule.read == .nobody ? "owner only" : "read by rule"]
                if rule.write != .nobody || rule.create != nil || rule.update != nil || rule.delete != nil { facts.append("users write") }
                let sources = Set(rule.sources.map(\.collection.rawValue))
                if !sources.isEmpty { facts.append("reads rows of \(sources.sorted().joined(separator: ", "))") }
                if !rule.claims.isEmpty { facts.append("claims \(rule.claims.joined(separator: ", "))") }
                print("  \(name): \(facts.joined(separator: "; "))")
            }
            print("collections not named here: the owner's alone")
        }
    }

    /// `deltasnap rules install --db D FILE`: the database's rules, for every server on it.
    struct Install: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Install a rules file in a database: every server on it follows the new version within a second, without a restart.",
            discussion: """
                The database holds the rules; each `deltasnap serve` with users follows its newest \
                version, deciding each request under one version. A file equal to the rules the \
                database holds changes nothing. docs/OPERATIONS.md, "Users", has the \
                sequence for a change without an outage:
                  deltasnap rules check rules.json
                  deltasnap rules install --db postgres://deltasnap@db.internal/deltasnap rules.json
                """)

        @Option(help: ArgumentHelp(Database.help, valueName: "database"))
        var db = "deltasnap.sqlite"

        @Argument(help: ArgumentHelp("The rules file.", valueName: "file"))
        var file: String

        func run() async throws {
            let rules = try RulesFile.read(file)
            let database = try Database(db)
            if case .sqlite(let path) = database, !FileManager.default.fileExists(atPath: path) { throw CommandFailure("\(path): no such database") }
            let store = try await database.open()
            defer { Task { try? await store.close() } }
            let before = try await store.currentRules()?.version
            let version = try await store.installRules(rules)
            if version == before {
                print("\(file): the database holds these rules already (version \(version)): nothing changed")
            } else {
                print("\(file): installed as rules version \(version); running servers follow it within a second")
            }
        }
    }

    /// `deltasnap rules explain`.
    struct Explain: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Say whether a user may read, update and delete a record, and which clause decided.",
            discussion: """
                Reads the record and the rows the rules read ($rows) from the database as it is now:
                  deltasnap rules explain --db app.sqlite --rules rules.json --claims '{"sub":"ada"}' --collection docs d1
                """)

        @Option(help: ArgumentHelp(Database.help, valueName: "database"))
        var db = "deltasnap.sqlite"

        @Option(help: ArgumentHelp("The rules file.", valueName: "file"))
        var rules: String

        @Option(help: ArgumentHelp("The user's claims as JSON, with \"sub\": '{\"sub\":\"ada\",\"teams\":[\"red\"]}'.", valueName: "json"))
        var claims: String

        @Option(help: ArgumentHelp("The collection.", valueName: "name"))
        var collection: String

        @Argument(help: ArgumentHelp("The record's id.", valueName: "id"))
        var id: String

        func run() async throws {
            let rules = try RulesFile.read(self.rules)
            let claims: Claims
            do { claims = try Claims(parsing: self.claims) } catch { throw ValidationError("--claims: \(error)") }
            let name = try CollectionName(collection)
            guard rules.rule(for: name) != nil else {
                print("\(name): not named by the rules: the owner's alone (users may not read or write it)")
                return
            }
            let store = try await Database(db).open()
            defer { Task { try? await store.close() } }
            guard let explanation = try await RuleExplanation.explain(rules, claims: claims, collection: name, id: id, store: store) else { return }
            print("\(name)/\(id) for \(claims.subject): \(explanation.state)")
            for line in explanation.lines {
                print("  \((line.operation + ":").padding(toLength: 7, withPad: " ", startingAt: 0)) \(line.reason)")
            }
        }
    }
}

import DeltaCore
import DeltaStore
import DeltaTestSupport
import Foundation
import Testing

/// Concurrent writes on one instance: on PostgreSQL they commit in groups, one transaction for
/// several writes (`PostgresWriteGroup`); each must still be exactly the commit it would have
/// been alone. The reference is the same successful writes replayed one by one, in the order of
/// their positions, on a fresh SQLite store: every result, record, position, tag and digest must
/// be the same, and nothing of a failed write may remain.
@Suite("Concurrent writes on one instance commit as they would one by one")
struct WriteGroupTests {
    /// One step of a write.
    enum Step: Sendable, CustomStringConvertible {
        case put(id: String, body: String)
        case hide(id: String)

        var description: String {
            switch self {
            case .put(let id, let body): "put \(id) \(body)"
            case .hide(let id): "hide \(id)"
            }
        }
    }

    /// How a write ends.
    enum Ending: Sendable {
        /// It commits (or changes nothing).
        case succeed
        /// Its body throws after its steps: none of them may remain.
        case throwAfter
        /// Its steps, then 1,001 new records (so the store sends a batch while the body runs), then it throws.
        case throwAfterBatch
    }

    struct Plan: Sendable {
        let collection: String
        let steps: [Step]
        let ending: Ending
    }

    struct Refused: Error {}

    /// Runs `plan` as one write; throws what the store or the body threw.
    static func run(_ plan: Plan, on store: any ChangeStore, tag: String) async throws -> CommitResult {
        try await store.write(to: name(plan.collection)) { transaction in
            for step in plan.steps {
                switch step {
                case .put(let id, let body): try await transaction.upsert(try record(#"{"id":"\#(id)","v":"\#(body)"}"#))
                case .hide(let id): try await transaction.hide(id: id)
                }
            }
            switch plan.ending {
            case .succeed: return
            case .throwAfter: throw Refused()
            case .throwAfterBatch:
                for index in 0..<1_001 { try await transaction.upsert(try record(#"{"id":"batch-\#(tag)-\#(index)"}"#)) }
                throw Refused()
            }
        }.commit
    }

    static func plan(_ random: inout SeededGenerator) -> Plan {
        let collection = Bool.random(using: &random) ? "a" : "b"
        var steps: [Step] = []
        for _ in 0..<Int.random(in: 1...3, using: &random) {
            // A small pool of ids and bodies: writes collide, repeat what is stored (unchanged),
            // hide what is hidden already or missing (not found), and write one id twice.
            let id = "r\(Int.random(in: 0..<12, using: &random))"
            if Int.random(in: 0..<4, using: &random) == 0 {
                steps.append(.hide(id: id))
            } else {
                steps.append(.put(id: id, body: "v\(Int.random(in: 0..<3, using: &random))"))
            }
        }
        let ending: Ending
        switch Int.random(in: 0..<20, using: &random) {
        case 0..<3: ending = .throwAfter
        case 3: ending = .throwAfterBatch
        default: ending = .succeed
        }
        return Plan(collection: collection, steps: steps, ending: ending)
    }

    @Test("Random concurrent writes, some failing, equal the successful ones replayed in position order", arguments: Backend.available)
    func exactAsOneByOne(backend: Backend) async throws {
        let seed = SeededGenerator.seed(for: "WriteGroupTests.exactAsOneByOne(\(backend))")
        let directory = URL(fileURLWithPath: try makeTemporaryDirectory("write-groups"))
        defer { try? FileManager.default.removeItem(at: directory) }
        let database = try await backend.makeDatabase(in: directory)
        let store = try await database.open()
        let reference = try await Backend.sqlite.makeDatabase(in: directory.appendingPathComponent("reference", isDirectory: true))
        try FileManager.default.createDirectory(at: directory.appendingPathComponent("reference"), withIntermediateDirectories: true)
        let model = try await reference.open()

        // Eight writers of 25 writes each, at once, on one instance.
        let outcomes = try await withThrowingTaskGroup(of: [(Plan, Result<CommitResult, any Error>)].self) { group in
            for writer in 0..<8 {
                group.addTask {
                    var random = SeededGenerator(seed: seed &+ UInt64(writer))
                    var outcomes: [(Plan, Result<CommitResult, any Error>)] = []
                    for index in 0..<25 {
                        let plan = Self.plan(&random)
                        do {
                            outcomes.append((plan, .success(try await Self.run(plan, on: store, tag: "\(writer)-\(index)"))))
                        } catch {
                            outcomes.append((plan, .failure(error)))
                        }
                    }
                    return outcomes
                }
            }
            var all: [(Plan, Result<CommitResult, any Error>)] = []
            for try await outcomes in group { all += outcomes }
            return all
        }

        var committed: [(plan: Plan, result: CommitResult)] = []
        var unchanged: [(plan: Plan, result: CommitResult)] = []
        var failures = 0
        for (plan, outcome) in outcomes {
            switch outcome {
            case .success(let result) where result.committed: committed.append((plan, result))
            case .success(let result): unchanged.append((plan, result))
            case .failure(let error):
                failures += 1
                // What a write may fail with: its own refusal, a missing record to hide, an id written twice.
                let expected = error is Refused || (error as? StoreError).map { [.notFound, .invalidWrite].contains($0.kind) } == true
                #expect(expected, "seed \(seed): a write failed with \(error)")
            }
        }
        committed.sort { $0.result.token.position < $1.result.token.position }
        #expect(
            committed.map(\.result.token.position) == Array(1...UInt64(committed.count)),
            "seed \(seed): the committed positions are not 1…\(committed.count) without gaps")

        // A write that changed nothing answers its collection's token then: a commit to it, or none yet.
        for (plan, result) in unchanged {
            let known = committed.contains { $0.plan.collection == plan.collection && $0.result.token == result.token }
            #expect(known || result.token.position == 0, "seed \(seed): an unchanged write (\(plan.steps)) answered \(result.token)")
        }
        // The same writes, one by one, in the order of their positions: the same results.
        for (index, (plan, result)) in committed.enumerated() {
            let replayed = try await Self.run(plan, on: model, tag: "replay-\(index)")
            #expect(
                replayed.token.position == result.token.position && replayed.token.commit == result.token.commit
                    && replayed.upserted == result.upserted && replayed.hidden == result.hidden && replayed.unchanged == result.unchanged,
                "seed \(seed): commit \(result.token.position) (\(plan.steps)) gave \(result), alone \(replayed)")
        }
        for collection in ["a", "b"] {
            #expect(
                try await database.storedRecords(collection) == (try await reference.storedRecords(collection)),
                "seed \(seed): the records of \(collection) differ from the writes replayed one by one")
            let (read, expected) = (try await store.read(name(collection), since: .nothing), try await model.read(name(collection), since: .nothing))
            if case .changes(let feed) = read, case .changes(let other) = expected {
                #expect(feed.token == Token(database: feed.token.database, position: other.token.position, commit: other.token.commit), "seed \(seed)")
                #expect(feed.digest == other.digest, "seed \(seed): the state digest of \(collection) differs")
                feed.close()
                other.close()
            } else if case .changes = read {
                Issue.record("seed \(seed): \(collection) has records, but none replayed one by one")
            }
        }
        if backend == .postgres {
            // Proof that writes were grouped: fewer transactions wrote commit rows than commits.
            let transactions = try await database.lines("SELECT count(DISTINCT xmin::text)::text FROM deltasnap.commits")
            print("WriteGroupTests.exactAsOneByOne(postgres): seed \(seed): \(committed.count) commits in \(transactions[0]) transactions")
            #expect(Int(transactions[0])! < committed.count, "seed \(seed): no two writes shared a transaction")
        }
        print("WriteGroupTests.exactAsOneByOne(\(backend)): seed \(seed): \(committed.count) commits, \(failures) failed writes checked")
        #expect(failures > 10 && committed.count > 50, "seed \(seed): too few failures or commits to prove anything")
        try await store.close()
        try await model.close()
        await database.remove()
    }
}

@Suite("The ids a write claims")
struct WriteClaimTests {
    @Test("After a writer connection's claims are swept, one id written twice in one commit is still refused", arguments: Backend.available)
    func sweptClaims(backend: Backend) async throws {
        try await backend.withStore { store, _ in
            // More ids than a writer connection keeps claimed (PostgreSQL: 100,000), on each of the
            // test's two writer connections. SQLite keeps no claims to sweep: a few ids show the same rule.
            let ids = backend == .postgres ? 100_001 : 1_000
            for round in 0..<2 {
                _ = try await store.write(to: name("many")) { transaction in
                    for index in 0..<ids { try await transaction.upsert(try record(#"{"id":"m\#(round)-\#(index)"}"#)) }
                }
            }
            for round in 0..<4 {
                let twice = await #expect(throws: StoreError.self) {
                    try await store.write(to: name("many")) { transaction in
                        try await transaction.hide(id: "m0-\(round)")
                        try await transaction.upsert(try record(#"{"id":"m0-\#(round)","again":true}"#))
                    }
                }
                #expect(twice?.kind == .invalidWrite, "\(String(describing: twice))")
                let result = try await put(store, "many", #"{"id":"after-\#(round)"}"#)
                #expect(result.committed && result.upserted == 1)
            }
            let stored = try await store.record("m0-0", in: name("many"))
            #expect(stored?.record.hidden == false, "the refused write left nothing")
        }
    }
}

import DeltaCore
import DeltaStore
import Foundation
import Hummingbird

/// The console's Activity page: the latest pushes, by user, client, collection and outcome.
extension Console {
    /// The outcomes the page filters by.
    static let outcomes: Set<String> = ["applied", "conflict", "denied", "invalid"]

    /// `GET /console/api/activity?collection=&user=&client=&outcome=&before=`: the mutations pushes
    /// applied (the database's log, every instance's, newest first, a page at a time), and, on the
    /// first page, those this server refused (`PushRefusals`) and, unless the filter is about
    /// pushes (a user, a client or an outcome), the records changed last by any writer.
    func activity(_ request: Request) async throws -> Response {
        func value(_ name: String) -> String? { Self.query(request, name) }
        let collection: CollectionName?
        do { collection = try value("collection").map(CollectionName.init) } catch {
            throw Problem.badRequest("console-parameter", "console: collection: \(error)")
        }
        let outcome = value("outcome")
        if let outcome, !Self.outcomes.contains(outcome) {
            throw Problem.badRequest("console-parameter", "console: outcome: one of \(Self.outcomes.sorted().joined(separator: ", ")) (got \(outcome))")
        }
        let before: UInt64?
        if let text = value("before") {
            guard let position = UInt64(text) else { throw Problem.badRequest("console-parameter", "console: before: a position (got \(text))") }
            before = position
        } else {
            before = nil
        }
        let (user, client) = (value("user"), value("client"))
        var applied = MutationPage(mutations: [], next: nil)
        if outcome == nil || outcome == "applied" {
            applied = try await store.recentMutations(MutationQuery(before: before, collection: collection, user: user, client: client, limit: 100))
        }
        let refused =
            before != nil || outcome == "applied"
            ? []
            : metrics.refusals.newest { entry in
                (collection == nil || entry.collection == collection?.rawValue) && (user == nil || entry.user == user)
                    && (client == nil || entry.client == client) && (outcome == nil || entry.status == outcome)
            }.prefix(100)
        let changes =
            before != nil || user != nil || client != nil || outcome != nil
            ? [] : try await store.recentChanges(in: collection, before: nil, limit: 50)
        return ConsoleResponse.json(
            .members([
                "changes": .array(
                    changes.map { change in
                        .members([
                            "position": .int(change.position), "time": .time(change.time), "collection": .string(change.collection.rawValue),
                            "id": .string(change.id), "hidden": .bool(change.hidden),
                        ])
                    }),
                "applied": .array(
                    applied.mutations.map { mutation in
                        .members([
                            "position": .int(mutation.position), "time": .time(Date(timeIntervalSince1970: TimeInterval(mutation.time))),
                            "collection": .string(mutation.collection), "id": .string(mutation.id), "user": mutation.user.map { .string($0) } ?? .null,
                            "client": .string(mutation.client), "mutation": .int(mutation.mutation), "operation": .string(mutation.operation),
                        ])
                    }),
                "next": applied.next.map { .int($0) } ?? .null,
                "refused": .array(
                    refused.map { entry in
                        .members([
                            "time": .time(entry.time), "collection": .string(entry.collection), "id": .string(entry.id),
                            "user": entry.user.map { .string($0) } ?? .null, "client": .string(entry.client), "mutation": .int(entry.mutation),
                            "operation": .string(entry.operation), "outcome": .string(entry.status), "reason": entry.reason.map { .string($0) } ?? .null,
                        ])
                    }),
            ]))
    }
}

import DeltaCore
import DeltaRules
import DeltaStore
import Foundation
import HTTPTypes
import Hummingbird

/// The console's Users page: what one user reads and may write under the rules in force, and why.
extension Console {
    /// How many of a collection's rows the page lists for a user.
    static let userRows = 20
    /// The most bytes of those rows the page reads to list them.
    static let userRowsBytes = 4 << 20

    /// `GET /console/api/rules`: the rules in force, their version and when they were installed.
    func rules() async throws -> Response {
        guard let stored = try await store.currentRules() else {
            return ConsoleResponse.json(.members(["version": .int(0), "installedAt": .null, "rules": .null]))
        }
        return ConsoleResponse.json(
            .members([
                "version": .int(stored.version), "installedAt": .time(stored.installedAt),
                "rules": stored.body.flatMap { try? JSONValue(parsing: $0) } ?? .null,
            ]))
    }

    /// `POST /console/api/users/check` with `{"claims": {...}}` or `{"token": "..."}` (verified as
    /// the API verifies it), and optionally `"collection"` and `"id"`: each collection's rows the
    /// user reads (read as the API answers that user: `GET /api/{collection}?limit=`), what the
    /// rules let them write, and, for the record named, `rules explain`'s answer.
    func checkUser(_ request: Request, context: BasicRequestContext) async throws -> Response {
        let body = try await Self.jsonBody(request, limit: 64 << 10)
        let claims: Claims
        if let token = body["token"]?.text {
            guard let authenticator = configuration.authenticator else {
                throw Problem.badRequest("console-no-users", "console: this server verifies no tokens (start it with --jwks or --jwt-secret)")
            }
            do { claims = try await authenticator.claims(of: token) } catch let refusal as TokenRefusal { throw refusal.problem }
        } else if let given = body["claims"] {
            do { claims = try Claims(parsing: String(decoding: given.canonicalBytes, as: UTF8.self)) } catch {
                throw Problem.badRequest("console-claims", "console: claims: \(error)")
            }
        } else {
            throw Problem.badRequest("console-claims", "console: give the user's claims ({\"claims\": {\"sub\": …}}) or a token ({\"token\": …})")
        }
        // What this server enforces, not only what the database holds: a server that verifies no
        // users answers every collection to everyone.
        let stored = enforcedRules
        let names = Set((stored?.rules.collections.keys).map(Array.init) ?? []).union(
            try await statistics.value(head: try await store.headPosition()) { try await store.collectionStatistics() }.map(\.name.rawValue)
        ).sorted()
        var collections: [JSONValue] = []
        for name in names {
            let collection = try CollectionName(name)
            let rule = stored?.rules.rule(for: collection)
            collections.append(
                .members([
                    "name": .string(name), "read": .string(Self.describe(rule?.read, "read", collection, named: stored != nil)),
                    "rows": try await rows(of: collection, as: claims, context: context),
                    "create": .string(Self.describe(rule?.access(for: .create), collection, named: stored != nil)),
                    "update": .string(Self.describe(rule?.access(for: .update), collection, named: stored != nil)),
                    "delete": .string(Self.describe(rule?.access(for: .delete), collection, named: stored != nil)),
                ]))
        }
        var explanation = JSONValue.null
        if let name = body["collection"]?.text, !name.isEmpty, let given = body["id"]?.text, !given.isEmpty, let stored {
            let id = try Self.recordID(given)
            let collection: CollectionName
            do { collection = try CollectionName(name) } catch { throw Problem.badRequest("console-parameter", "console: collection: \(error)") }
            if let explained = try await RuleExplanation.explain(stored.rules, claims: claims, collection: collection, id: id, store: store) {
                explanation = .members([
                    "collection": .string(name), "id": .string(id), "state": .string(explained.state),
                    "lines": .array(
                        explained.lines.map {
                            .members(["operation": .string($0.operation), "allowed": $0.allowed.map { .bool($0) } ?? .null, "reason": .string($0.reason)])
                        }),
                ])
            } else {
                explanation = .members([
                    "collection": .string(name), "id": .string(id), "state": .string("not named by the rules: the owner's alone"), "lines": .array([]),
                ])
            }
        }
        return ConsoleResponse.json(
            .members([
                "subject": .string(claims.subject),
                "claims": .object(claims.values.sorted { $0.key < $1.key }.map { JSONMember(key: $0.key, value: $0.value) }),
                "rulesVersion": .int(stored?.version ?? 0), "collections": .array(collections), "explanation": explanation,
            ]))
    }

    /// The first `userRows` ids of `collection` the user reads, as the API answers them: the
    /// router's own read, as that user (`Caller.readingAs`), uncounted in the metrics.
    private func rows(of collection: CollectionName, as claims: Claims, context: BasicRequestContext) async throws -> JSONValue {
        guard let responder = responder.responder else { return .members(["error": .string("the router is not running")]) }
        let path = "/api/\(collection.rawValue.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed) ?? collection.rawValue)?limit=\(Self.userRows + 1)"
        let head = HTTPRequest(method: .get, scheme: nil, authority: "console", path: path)
        let sink = SharedAnswer.Sink(limit: Self.userRowsBytes)
        let response = try await SharedAnswer.$computing.withValue(true) {
            try await Caller.$readingAs.withValue(.user(claims)) {
                try await responder.respond(to: Request(head: head, body: RequestBody(buffer: ByteBuffer())), context: context)
            }
        }
        try await response.body.write(SharedAnswer.Collector(sink: sink))
        guard response.status == .ok, let body = sink.bytes, let value = try? JSONValue(parsing: body.readableBytesView),
            case .array(let records)? = value[collection.rawValue]
        else {
            let detail = sink.bytes.flatMap { try? JSONValue(parsing: $0.readableBytesView) }?["detail"]?.text
            if response.status == .ok, sink.bytes == nil {
                // Read, but not listed: the page does not hold rows this large in memory.
                let limit = "\(Self.userRowsBytes >> 20) MB"
                return .members([
                    "status": .int(200), "error": .string("readable, but its first \(Self.userRows + 1) rows take more than \(limit): not listed here"),
                ])
            }
            return .members(["status": .int(response.status.code), "error": .string(detail ?? response.status.reasonPhrase)])
        }
        let ids = records.prefix(Self.userRows).compactMap { $0["id"]?.text }
        return .members(["status": .int(200), "ids": .array(ids.map { .string($0) }), "more": .bool(records.count > Self.userRows)])
    }

    /// Who may read a collection, in words.
    private static func describe(_ access: CollectionRule.Access?, _ rule: String, _ collection: CollectionName, named: Bool = true) -> String {
        switch access {
        case nil where !named: "everyone (this server verifies no users: every collection is public)"
        case nil: "nobody but the owner (the rules do not name it)"
        case .everyone?: "everyone"
        case .nobody?: "nobody but the owner"
        case .when?: "when its rule holds (/collections/\(collection.rawValue)/\(rule))"
        }
    }

    /// Who may write (one operation), in words.
    private static func describe(_ access: (access: CollectionRule.Access, rule: String)?, _ collection: CollectionName, named: Bool = true) -> String {
        guard named else { return "nobody but the owner (this server verifies no users)" }
        return describe(access?.access, access?.rule ?? "write", collection)
    }
}

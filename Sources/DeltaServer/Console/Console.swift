import DeltaCore
import DeltaStore
import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOConcurrencyHelpers

/// The operator's console (`deltasnap serve --console`): pages at `/console/` that show and steer
/// this server, signed in with the owner's secret (docs/OPERATIONS.md, "Console").
///
/// Its pages are HTML shells from this binary (`ConsolePage`), filled by the console's own script
/// (`ConsoleAssets`) from JSON at `/console/api/…`. It reads through the store's roles
/// (`StoreInspection`, `StoreAdministration`, `ChangeReader`), each call bounded, and writes
/// through `ChangeWriter` like the API's owner. Every route's access is declared in `routes` and
/// checked in one place (`ConsoleHandler.gated`).
struct Console: Sendable {
    let store: any ChangeStore
    let configuration: ServerConfiguration
    let metrics: ServerMetrics
    let longPoll: LongPoll
    /// The router, for the Users page's reads as a user.
    let responder: LateResponder
    let logger: Logger
    let sessions = ConsoleSessions()
    let throttle = SignInThrottle()
    /// The overview's collection statistics, kept a few seconds: they take a pass over the records.
    let statistics = ConsoleStatisticsCache()

    /// Most records a page of a collection lists, and most it examines for a filter, in count
    /// and in bytes of bodies (read `batchBytes` at a time at most).
    static let pageRecords = 50, examinedRecords = 5_000, examinedBytes = 64 << 20, batchBytes = 4 << 20
    /// Bodies larger than this are shown as a preview in lists and histories, and a record's
    /// current body when larger than `wholeBytes`.
    static let previewBytes = 16 << 10, wholeBytes = 1 << 20

    /// Every console route: method, path, and its handler as its access shapes it.
    var routes: [(method: HTTPRequest.Method, path: String, handler: ConsoleHandler)] {
        [
            (.get, "/console", .open { _, _ in ConsoleResponse.redirect(to: "/console/overview") }),
            (.get, "/console/console.js", .open { _, _ in ConsoleAssets.script() }),
            (.get, "/console/console.css", .open { _, _ in ConsoleAssets.style() }),
            (.get, "/console/icon.svg", .open { _, _ in ConsoleAssets.icon() }),
            (.get, "/console/sign-in", .open { request, _ in signInPage(request) }),
            (.post, "/console/sign-in", .open { request, _ in try await signIn(request) }),
            (.post, "/console/sign-out", .action(.form) { request, _, _, _ in signOut(request) }),
            (.get, "/console/overview", .page { _, _, session in ConsolePage.render(.overview, session: session) }),
            (.get, "/console/collection", .page { request, _, session in ConsolePage.render(.collection, session: session, request: request) }),
            (.get, "/console/record", .page { request, _, session in ConsolePage.render(.record, session: session, request: request) }),
            (.get, "/console/users", .page { _, _, session in ConsolePage.render(.users, session: session) }),
            (.get, "/console/activity", .page { request, _, session in ConsolePage.render(.activity, session: session, request: request) }),
            (.get, "/console/actions", .page { _, _, session in ConsolePage.render(.actions, session: session) }),
            (.get, "/console/api/overview", .data { _, _, _ in try await overview() }),
            (.get, "/console/api/records", .data { request, _, _ in try await records(request) }),
            (.get, "/console/api/record", .data { request, _, _ in try await record(request) }),
            (.get, "/console/api/activity", .data { request, _, _ in try await activity(request) }),
            (.get, "/console/api/rules", .data { _, _, _ in try await rules() }),
            (.post, "/console/api/users/check", .action(.other) { request, context, _, _ in try await checkUser(request, context: context) }),
            (.post, "/console/api/record/hide", .action(.other) { request, _, _, _ in try await setHidden(request, true) }),
            (.post, "/console/api/record/unhide", .action(.other) { request, _, _, _ in try await setHidden(request, false) }),
            (.post, "/console/api/compact", .action(.other) { request, _, _, _ in try await compact(request) }),
            (.post, "/console/api/rules", .action(.other) { request, _, _, _ in try await installRules(request) }),
            (.post, "/console/snapshot", .action(.form) { request, _, _, form in try await snapshot(request, form) }),
        ]
    }

    /// Adds the console's routes to `router`.
    func register(on router: Router<BasicRequestContext>) {
        for route in routes {
            router.on(RouterPath(route.path), method: route.method, use: route.handler.gated(sessions))
        }
    }

    /// The rules this server enforces now: the database's version it follows, or its fixed ones;
    /// nil when it verifies no users (every collection is then public to read, whatever the
    /// database holds).
    var enforcedRules: StoredRules? {
        guard configuration.authenticator != nil else { return nil }
        return configuration.liveRules?.current ?? configuration.rules
    }

    /// A query parameter's value, or a `400` naming it.
    static func parameter(_ request: Request, _ name: String) throws -> String {
        guard let value = query(request, name) else {
            throw Problem.badRequest("console-parameter", "console: the query parameter \(name) is required")
        }
        return value
    }

    /// A query parameter's value as a browser's form encodes it (`+` for a space, as
    /// `URLSearchParams` and `<form method="get">` write it), nil when absent or empty; the last
    /// one when repeated.
    static func query(_ request: Request, _ name: String) -> String? {
        var found: String?
        for pair in (request.uri.query ?? "").split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let decode = { (text: Substring) in String(text).replacingOccurrences(of: "+", with: " ").removingPercentEncoding }
            guard decode(parts[0]) == name else { continue }
            found = parts.count > 1 ? decode(parts[1]) : ""
        }
        return found.flatMap { $0.isEmpty ? nil : $0 }
    }

    /// The collection named by the query parameter `collection`, or a `400`.
    static func collection(_ request: Request) throws -> CollectionName {
        let text = try parameter(request, "collection")
        do { return try CollectionName(text) } catch { throw Problem.badRequest("console-parameter", "console: collection: \(error)") }
    }

    /// `id` when the API would take it as a record id, or a `400` saying why.
    static func recordID(_ id: String) throws -> String {
        do { try Record.validate(id: id) } catch { throw Problem.badRequest("invalid-id", "console: record id: \(error)") }
        return id
    }

    /// A request's JSON body (at most `limit` bytes), or a `400`.
    static func jsonBody(_ request: Request, limit: Int = 1 << 20) async throws -> JSONValue {
        let body: ByteBuffer
        do { body = try await request.body.collect(upTo: limit) } catch {
            throw Problem(.contentTooLarge, "console-body", "console: the body is larger than \(limit) bytes")
        }
        do { return try JSONValue(parsing: body.readableBytesView) } catch {
            throw Problem.badRequest("console-body", "console: the body is not JSON: \(error)")
        }
    }
}

/// The overview's collection statistics (a pass over the records), read again only when the
/// database's head moved since: pages that refresh a database at rest cost it nothing, and a
/// page loaded after a write shows it.
final class ConsoleStatisticsCache: Sendable {
    private let kept = NIOLockedValueBox<(head: UInt64, value: [CollectionStatistics])?>(nil)

    /// The statistics at `head`: those kept when they were read there, else `read`'s.
    func value(head: UInt64, _ read: () async throws -> [CollectionStatistics]) async throws -> [CollectionStatistics] {
        if let kept = kept.withLockedValue({ $0 }), kept.head == head { return kept.value }
        let value = try await read()
        kept.withLockedValue { $0 = (head, value) }
        return value
    }
}

extension JSONValue {
    /// An integer.
    static func int(_ value: some BinaryInteger) -> JSONValue { .number(String(value)) }
    /// A number with up to three decimals, or null.
    static func decimal(_ value: Double?) -> JSONValue {
        guard let value, value.isFinite else { return .null }
        return .number(String(format: "%.3f", value).replacingOccurrences(of: #"\.?0+$"#, with: "", options: .regularExpression))
    }
    /// A time as ISO 8601 (UTC), or null.
    static func time(_ date: Date?) -> JSONValue {
        guard let date else { return .null }
        return .string(date.formatted(.iso8601))
    }
    /// The string, if this is one.
    var text: String? {
        if case .string(let text) = self { return text }
        return nil
    }
    /// An object from pairs, in order.
    static func members(_ pairs: KeyValuePairs<String, JSONValue>) -> JSONValue { .object(pairs.map { JSONMember(key: $0.key, value: $0.value) }) }
}

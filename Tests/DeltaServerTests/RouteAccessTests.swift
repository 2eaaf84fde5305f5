import DeltaCore
import DeltaRules
import DeltaServer
import DeltaStore
import DeltaTestSupport
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOCore
import Testing

/// Every route, as `Route.allCases` lists it (a new route is in this test the day it is added),
/// asked by every principal: what each may reach is what the route's access says, enforced in
/// one place (`RouteHandler.gated`). Through the router in-process: no socket needed.
@Suite("Every route's access, asked by every principal: nobody, a wrong secret, the client key, a user, the owner")
struct RouteAccessTests {
    /// The principals, by the `Authorization` they send.
    enum Asker: String, CaseIterable {
        case nobody, wrong, client, user, owner
    }

    /// What the route answers each principal, at least: `nil` means "anything but 401 and 403".
    /// A blob is `404` to whoever may not read it, as one that does not exist (docs/PROTOCOL.md, "Files").
    static func expected(_ route: Route, _ asker: Asker) -> Set<Int>? {
        let access = access(route)
        switch (access, asker) {
        case ("anyone", _): return nil
        case (_, .wrong): return [401]
        case ("reader", .nobody) where route == .blob || route == .blobHead, ("reader", .client) where route == .blob || route == .blobHead: return [404]
        case ("reader", .nobody): return [401]
        case ("reader", .client): return [403]
        case ("writer", .nobody), ("owner", .nobody): return [401]
        case ("owner", .client), ("owner", .user): return [403]
        default: return nil
        }
    }

    /// A request of `route` for a restricted collection's record and an unknown blob.
    static func target(_ route: Route) -> String {
        route.path.replacingOccurrences(of: "{collection}", with: "notes").replacingOccurrences(of: "{id}", with: "n1").replacingOccurrences(
            of: "{sha256}", with: String(repeating: "0", count: 64))
    }

    @Test("Each route answers each principal as its access says; a restricted record or blob says nothing to those who may not read it")
    func everyRoute() async throws {
        try await Backend.sqlite.withStore { store, _ in try await Self.everyRoute(store) }
    }

    static func everyRoute(_ store: any ChangeStore & EarlyVerdicts) async throws {
        var configuration = ServerConfiguration()
        configuration.port = 0
        configuration.writeToken = secret
        configuration.clientKey = "client-key-123"
        let rules = try Rules(parsing: Array(exampleRules.utf8))
        configuration.rules = StoredRules(version: try await store.installRules(rules), rules: rules)
        configuration.authenticator = try await Authenticator(secret: userSecret, jwks: nil)
        let user = try await Mint.hs256("ada")
        let tokens: [Asker: String?] = [.nobody: nil, .wrong: "not-the-secret", .client: "client-key-123", .user: user, .owner: secret]
        _ = try await store.write(to: try CollectionName("notes")) { try await $0.upsert(try Record(parsing: Array(#"{"id":"n1","owner":"bob"}"#.utf8))) }
        let app = buildApplication(store: store, earlyVerdicts: store, configuration: configuration)
        let checked = try await app.test(.router) { client -> Int in
            var checked = 0
            for route in Route.allCases {
                for asker in Asker.allCases {
                    var headers: HTTPFields = [.contentType: "application/json"]
                    if let token = tokens[asker] ?? nil { headers[.authorization] = "Bearer \(token)" }
                    let body = route.method == .get || route.method == .head ? nil : ByteBuffer(string: #"{"id":"n1","owner":"ada"}"#)
                    let answer = try await client.execute(uri: target(route), method: route.method, headers: headers, body: body)
                    let status = Int(answer.status.code)
                    let context =
                        "\(route.method) \(route.path) [\(String(describing: route).split(separator: ".").last ?? "")] as \(asker.rawValue): \(status)"
                    if let expected = expected(route, asker) {
                        #expect(expected.contains(status), "\(context)")
                    } else {
                        #expect(status != 401 && (status != 403 || mayRefuse(route, asker)), "\(context)")
                    }
                    // Bob's note is nobody's business but his and the owner's: never a byte of it.
                    if asker != .owner {
                        #expect(!String(buffer: answer.body).contains("bob"), "\(context): \(String(buffer: answer.body).prefix(200))")
                    }
                    checked += 1
                }
            }
            return checked
        }
        #expect(checked == Route.allCases.count * Asker.allCases.count)
    }

    /// The access of `route`, as its handler is shaped (`Route.access` is internal to the server:
    /// this is the same list, written out, and the test fails when the two disagree).
    static func access(_ route: Route) -> String {
        switch route {
        case .health, .metrics, .openAPI, .snapshot, .currentSnapshot: "anyone"
        case .read, .readHead, .record, .blob, .blobHead: "reader"
        case .put, .delete, .push, .blobPut, .blobKept: "writer"
        case .batch, .bakes: "owner"
        }
    }

    /// A `403` that is not an access refusal but a rule's: the client key writing a collection
    /// apps may not write (`not-writable`), a user's write the rules deny.
    static func mayRefuse(_ route: Route, _ asker: Asker) -> Bool {
        switch (route, asker) {
        case (.put, .client), (.delete, .client), (.push, .client), (.put, .user), (.delete, .user): true
        default: false
        }
    }
}

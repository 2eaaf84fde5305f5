import DeltaCore
import DeltaStore
import HTTPTypes
import Hummingbird
import NIOCore

/// `POST /bakes` (docs/PROTOCOL.md, "Compaction"): the data owner records that snapshots were
/// baked at these tokens, as `deltasnap bake --url` does after baking from a running server, so
/// that `deltasnap compact` keeps them valid while apps ship them. The owner's secret only.
///
/// Body: `{"bakes":[{"collection":"widgets","token":"W/\"1.…\""}, …]}`, at most `maximumBakes`
/// entries, each token issued by this database and not ahead of its head. Answer: `200`
/// `{"recorded":N}`; nothing is recorded when any entry is refused (`400 invalid-bake`).
struct BakeRoute: Sendable {
    let store: any ChangeReader & StoreAdministration
    let configuration: ServerConfiguration

    /// The most entries one request records.
    static let maximumBakes = 1_000

    /// Records the bakes; reached by the owner only (`Route.access`).
    func handle(_ request: Request, context: some RequestContext) async throws -> Response {
        let body = try await collect(request, configuration)
        let bakes = try parse(body.readableBytesView)
        let head = try await store.headPosition()
        for bake in bakes {
            guard bake.token.database == store.databaseID else {
                throw Problem.badRequest("invalid-bake", "token: issued by a different database (\(bake.token.entityTag.prefix(100)))")
            }
            guard bake.token.position <= head else {
                throw Problem.badRequest("invalid-bake", "token: names position \(bake.token.position), after this database's newest commit (\(head))")
            }
        }
        try await store.recordBakes(bakes)
        let bytes = Array("{\"recorded\":\(bakes.count)}\n".utf8)
        return Response(
            status: .ok, headers: [.contentType: "application/json", .cacheControl: "no-store"], body: .init(byteBuffer: ByteBuffer(bytes: bytes)))
    }

    /// The entries of a body, or `400 invalid-bake` saying what is wrong.
    private func parse(_ bytes: some Collection<UInt8>) throws -> [(collection: CollectionName, token: Token)] {
        func refuse(_ why: String) -> Problem { Problem.badRequest("invalid-bake", "bakes: \(why)") }
        guard let value = try? JSONValue(parsing: bytes, limits: JSONLimits(maximumDepth: 4, maximumStringBytes: 4_096)),
            case .object(let members) = value, members.count == 1, members[0].key == "bakes", case .array(let items) = members[0].value
        else { throw refuse(#"the body must be {"bakes":[{"collection":NAME,"token":ETAG},…]}"#) }
        guard !items.isEmpty, items.count <= Self.maximumBakes else { throw refuse("give 1 to \(Self.maximumBakes) entries (got \(items.count))") }
        return try items.enumerated().map { index, item in
            guard case .object(let fields) = item, fields.count == 2,
                let name = fields.first(where: { $0.key == "collection" }), case .string(let collection) = name.value,
                let tag = fields.first(where: { $0.key == "token" }), case .string(let token) = tag.value
            else { throw refuse("entry \(index): must be {\"collection\":NAME,\"token\":ETAG}") }
            guard let parsedName = try? CollectionName(collection) else {
                throw refuse("entry \(index): \(String(reflecting: String(collection.prefix(80)))) is not a collection name")
            }
            guard let parsedToken = try? Token(entityTag: token) else {
                throw refuse("entry \(index): \(String(reflecting: String(token.prefix(100)))) is not a token this server issued")
            }
            return (parsedName, parsedToken)
        }
    }
}

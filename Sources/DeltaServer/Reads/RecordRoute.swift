import DeltaCore
import DeltaStore
import HTTPTypes
import Hummingbird
import NIOCore

/// `GET /api/{collection}/{id}`: one record, hidden ones too (marked `"hidden": true`), with a
/// strong `ETag` naming its version: the `If-Match` of a conditional write. For tools and debugging.
/// Under rules, a restricted collection's record is answered to the owner, and to a user only
/// when it is visible and the read rule gives it to them: else `404`, as if it did not exist.
/// Without a credential it is `401`; with the client key `403 not-readable`, as the collection's read.
struct RecordRoute: RulesPinned {
    let store: any ChangeReader
    /// The settings; `rules` pinned for each request (`RulesPinned`).
    var configuration: ServerConfiguration

    /// Answers the record as `caller` may read it (`ReadPolicy`).
    func handle(_ request: Request, context: some RequestContext, caller: Caller) async throws -> Response {
        let collection = try collectionName(context)
        let id = try recordID(context)
        let missing = Problem(.notFound, "not-found", "record \(String(reflecting: id)) in \(collection): does not exist")
        let found: StoredRecord?
        switch try await configuration.readPolicy.scope(of: collection, for: caller) {
        case .everything: found = try await store.record(id, in: collection)
        case .rule(let filter, let claims): found = try await readable(id, in: collection, under: filter, for: claims)
        }
        guard let stored = found else { throw missing }
        var headers: HTTPFields = [:]
        headers[.eTag] = stored.entityTag
        headers[.cacheControl] = "no-store"
        if request.headers[.ifNoneMatch]?.split(separator: ",").contains(where: { String($0).trimmingWhitespace == stored.entityTag }) == true {
            return Response(status: .notModified, headers: headers)
        }
        var bytes = stored.record.wireJSON
        bytes.append(UInt8(ascii: "\n"))
        headers[.contentType] = "application/json"
        headers[.contentLength] = String(bytes.count)
        return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: bytes)))
    }
}

import DeltaCore
import DeltaStore
import HTTPTypes
import Hummingbird
import NIOCore

/// `GET /api/{collection}/{id}`: one record, hidden ones too (marked `"hidden": true`), with a
/// strong `ETag` naming its version: the `If-Match` of a conditional write. For tools and debugging.
struct RecordRoute: Sendable {
    let store: any ChangeStore

    func handle(_ request: Request, context: some RequestContext) async throws -> Response {
        let collection = try collectionName(context)
        let id = try recordID(context)
        guard let stored = try await store.record(id, in: collection) else {
            throw Problem(.notFound, "not-found", "record \(String(reflecting: id)) in \(collection): does not exist")
        }
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

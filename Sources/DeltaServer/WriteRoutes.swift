import DeltaCore
import DeltaStore
import Foundation
import HTTPTypes
import Hummingbird
import Prometheus
import NIOCore

/// `PUT /api/{collection}/{id}`, `DELETE /api/{collection}/{id}`, `POST /api/{collection}`: the data owner's writes.
struct WriteRoutes: Sendable {
    let store: any ChangeStore
    let configuration: ServerConfiguration
    let metrics: ServerMetrics

    /// Upserts one record; the path id must equal the body's `"id"`.
    func put(_ request: Request, context: some RequestContext) async throws -> Response {
        try authorize(request)
        let collection = try collectionName(context)
        let id = try recordID(context)
        let body = try await collect(request)
        let record = try Record(parsing: body.readableBytesView)
        guard record.id == id else {
            throw Problem.badRequest(
                "id-mismatch", "record: the body's \"id\" differs from the path (body \(String(reflecting: record.id)), path \(String(reflecting: id)))")
        }
        let result = try await store.write(to: collection) { try await $0.upsert(record) }
        return summary(result.commit)
    }

    /// Hides one record: it stays as a tombstone and clients receive it with `"hidden": true`.
    func delete(_ request: Request, context: some RequestContext) async throws -> Response {
        try authorize(request)
        let collection = try collectionName(context)
        let id = try recordID(context)
        let result = try await store.write(to: collection) { try await $0.hide(id: id) }
        return summary(result.commit)
    }

    /// Upserts a JSON array of records as one commit; each may carry `"hidden": true/false`.
    func post(_ request: Request, context: some RequestContext) async throws -> Response {
        try authorize(request)
        let collection = try collectionName(context)
        let body = try await collect(request)
        var reader = RecordReader()
        reader.feed(body.readableBytesView)
        reader.finish()
        guard body.readableBytesView.first(where: { ![0x20, 0x09, 0x0A, 0x0D].contains($0) }) == UInt8(ascii: "[") else {
            throw Problem.badRequest("invalid-batch", "batch: the body must be a JSON array of records")
        }
        let result = try await store.write(to: collection) { transaction in
            while let record = try reader.next() { try await transaction.upsert(record) }
        }
        return summary(result.commit)
    }

    /// Requires `Authorization: Bearer <secret>`, compared in constant time.
    private func authorize(_ request: Request) throws {
        guard let secret = configuration.writeToken else {
            throw Problem(.forbidden, "read-only", "writes: this server is read-only (start it with --write-token or DELTASNAP_WRITE_TOKEN)")
        }
        let challenge: HTTPFields = [.wwwAuthenticate: "Bearer realm=\"deltasnap\""]
        guard let header = request.headers[.authorization] else {
            throw Problem(.unauthorized, "unauthorized", "writes: an Authorization: Bearer <secret> header is required", headers: challenge)
        }
        let parts = header.split(separator: " ", maxSplits: 1)
        guard parts.count == 2, parts[0].lowercased() == "bearer",
            constantTimeEqual(Array(parts[1].utf8), Array(secret.utf8))
        else {
            throw Problem(.unauthorized, "unauthorized", "writes: the bearer secret is wrong", headers: challenge)
        }
    }

    /// The request body, refusing more than the configured limit before reading it when possible.
    private func collect(_ request: Request) async throws -> ByteBuffer {
        let limit = configuration.maximumBodyBytes
        if let type = request.headers[.contentType]?.lowercased(), !type.hasPrefix("application/json") {
            throw Problem(.unsupportedMediaType, "unsupported-media-type", "request body: must be application/json (got \(String(reflecting: type)))")
        }
        if let length = request.headers[.contentLength].flatMap({ Int($0) }), length > limit {
            throw Problem(.contentTooLarge, "too-large", "request body: larger than the limit (\(length) bytes, limit \(limit))")
        }
        do {
            return try await request.body.collect(upTo: limit)
        } catch let error as HTTPError where error.status == .contentTooLarge {
            throw Problem(.contentTooLarge, "too-large", "request body: larger than the limit (limit \(limit) bytes)")
        }
    }

    private func summary(_ commit: CommitResult) -> Response {
        if commit.committed { metrics.headPosition.set(Int64(commit.token.position)) }
        let object = JSONValue.object([
            JSONMember(key: "committed", value: .bool(commit.committed)),
            JSONMember(key: "etag", value: .string(commit.token.entityTag)),
            JSONMember(key: "hidden", value: .number(String(commit.hidden))),
            JSONMember(key: "lastModified", value: .string(commit.token.lastModified)),
            JSONMember(key: "position", value: .number(String(commit.token.position))),
            JSONMember(key: "unchanged", value: .number(String(commit.unchanged))),
            JSONMember(key: "upserted", value: .number(String(commit.upserted))),
        ])
        var bytes = object.canonicalBytes
        bytes.append(UInt8(ascii: "\n"))
        return Response(
            status: .ok,
            headers: [.contentType: "application/json", .cacheControl: "no-store", .contentLength: String(bytes.count)],
            body: .init(byteBuffer: ByteBuffer(bytes: bytes)))
    }
}

import DeltaCore
import Foundation
import HTTPTypes
import Hummingbird
import NIOCore

/// `GET /snapshots/{sha256}` and `GET /snapshots/current/{collection}` (docs/PROTOCOL.md,
/// "Snapshots by content"): baked snapshots served by the SHA-256 of their bytes, immutable, so
/// that any HTTP cache or CDN keeps them; and a short-lived redirect to the current one.
struct SnapshotRoute: Sendable {
    /// The directory `--snapshots` names; nil: snapshots are not served.
    let directory: SnapshotDirectory?

    /// How long a cache may keep the redirect to the current snapshot.
    static let currentMaxAge = 60

    /// One snapshot by the SHA-256 of its bytes: immutable, with a strong `ETag` of that hash.
    func byHash(_ request: Request, context: some RequestContext) async throws -> Response {
        let hash = try context.parameters.require("sha256")
        guard hash.utf8.count == 64, hash.utf8.allSatisfy({ (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }) else {
            throw Problem(
                .notFound, "unknown-snapshot",
                "snapshot: a name is 64 lowercase hex digits, the SHA-256 of the file (got \(String(reflecting: String(hash.prefix(80)))))")
        }
        guard let entry = await (try served()).entry(hash) else {
            throw Problem(.notFound, "unknown-snapshot", "snapshot \(hash): no file in the snapshot directory has this SHA-256")
        }
        var headers: HTTPFields = [:]
        headers[.eTag] = "\"\(entry.sha256)\""
        headers[.cacheControl] = "public, max-age=31536000, immutable"
        if request.headers[.ifNoneMatch]?.split(separator: ",").contains(where: { String($0).trimmingWhitespace == "\"\(entry.sha256)\"" }) == true {
            return Response(status: .notModified, headers: headers)
        }
        guard let handle = FileHandle(forReadingAtPath: entry.url.path) else {
            throw Problem(.notFound, "unknown-snapshot", "snapshot \(hash): the file is gone (\(entry.url.lastPathComponent))")
        }
        headers[.contentType] = "application/octet-stream"
        headers[.contentLength] = String(entry.size)
        return Response(
            status: .ok, headers: headers,
            body: ResponseBody { writer in
                defer { try? handle.close() }
                while let chunk = try handle.read(upToCount: 1 << 16), !chunk.isEmpty { try await writer.write(ByteBuffer(bytes: chunk)) }
                try await writer.finish(nil)
            })
    }

    /// A `307` to the snapshot holding `collection` at the newest token, kept by caches for a minute.
    func current(_ request: Request, context: some RequestContext) async throws -> Response {
        let collection = try collectionName(context)
        guard let entry = await (try served()).current(collection.rawValue) else {
            throw Problem(.notFound, "unknown-snapshot", "snapshot of \(collection): none in the snapshot directory holds this collection")
        }
        var headers: HTTPFields = [:]
        headers[.location] = "/snapshots/\(entry.sha256)"
        headers[.cacheControl] = "public, max-age=\(Self.currentMaxAge)"
        headers[.contentType] = "application/json"
        let body =
            JSONValue.object([
                JSONMember(key: "collection", value: .string(collection.rawValue)),
                JSONMember(key: "position", value: .number(String(entry.collections[collection.rawValue] ?? 0))),
                JSONMember(key: "sha256", value: .string(entry.sha256)),
            ]).canonicalBytes + [UInt8(ascii: "\n")]
        return Response(status: .temporaryRedirect, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: body)))
    }

    private func served() throws -> SnapshotDirectory {
        guard let directory else { throw Problem(.notFound, "snapshots-not-served", "snapshots: this server serves none (start it with --snapshots DIR)") }
        return directory
    }
}

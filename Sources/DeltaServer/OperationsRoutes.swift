import DeltaStore
import Hummingbird
import NIOCore
import Prometheus

/// `GET /healthz`, `GET /metrics` and `GET /openapi.json`: what operators and tools ask.
struct OperationsRoutes: Sendable {
    let store: any ChangeReader & BlobStore
    let metrics: ServerMetrics

    /// The head position, or a `503 store-unavailable` problem when the store cannot be used.
    func health() async throws -> Response {
        let head = try await store.headPosition()
        let bytes = Array("{\"position\":\(head),\"status\":\"ok\"}\n".utf8)
        return Response(status: .ok, headers: [.contentType: "application/json", .cacheControl: "no-store"], body: .init(byteBuffer: ByteBuffer(bytes: bytes)))
    }

    /// The Prometheus text of every metric, with the head position read now.
    func metrics() async throws -> Response {
        metrics.headPosition.set(Int64(try await store.headPosition()))
        let blobs = try await store.blobTotals()
        metrics.blobs.stored.set(Int64(blobs.blobs))
        metrics.blobs.storedBytes.set(blobs.bytes)
        let text = metrics.registry.emitToBuffer()
        return Response(
            status: .ok, headers: [.contentType: "text/plain; version=0.0.4", .cacheControl: "no-store"],
            body: .init(byteBuffer: ByteBuffer(bytes: text)))
    }

    /// docs/openapi.yaml as JSON (`OpenAPIDocument`), the same for every server of this version.
    static func openAPI() -> Response {
        Response(
            status: .ok, headers: [.contentType: "application/json", .cacheControl: "public, max-age=3600"],
            body: .init(byteBuffer: ByteBuffer(string: OpenAPIDocument.json)))
    }
}

public import HTTPTypes

/// Every route the server answers: the one list the router registers, and the one
/// docs/openapi.yaml describes (`OpenAPITests` holds the two in step). Paths are written as
/// OpenAPI writes them, `{name}` for a path parameter, which the router reads the same way.
public enum Route: String, CaseIterable, Sendable {
    /// `GET /api/{collection}`: the full dataset, a delta, `304`, or a reset (docs/PROTOCOL.md).
    case read
    /// `HEAD /api/{collection}`: the headers `GET` would send.
    case readHead
    /// `GET /api/{collection}/{id}`: one record with its strong `ETag`.
    case record
    /// `PUT /api/{collection}/{id}`: upserts one record.
    case put
    /// `DELETE /api/{collection}/{id}`: hides one record.
    case delete
    /// `POST /api/{collection}`: the owner's batch of records, one commit.
    case batch
    /// `POST /push`: an app's queued writes.
    case push
    /// `POST /bakes`: records the tokens of a bake, so compaction keeps them.
    case bakes
    /// `GET /snapshots/current/{collection}`: a redirect to the newest snapshot of a collection.
    case currentSnapshot
    /// `GET /snapshots/{sha256}`: a baked snapshot by its hash.
    case snapshot
    /// `PUT /blobs/{sha256}`: stores a blob under the SHA-256 of its bytes.
    case blobPut
    /// `GET /blobs/{sha256}`: a blob, or one range of it.
    case blob
    /// `HEAD /blobs/{sha256}`: the headers `GET` would send.
    case blobHead
    /// `HEAD /blobs/{sha256}/upload`: how many bytes of an interrupted upload the server kept.
    case blobKept
    /// `GET /healthz`: the head position, or `503` when the store cannot be used.
    case health
    /// `GET /metrics`: Prometheus text.
    case metrics
    /// `GET /openapi.json`: docs/openapi.yaml as JSON.
    case openAPI

    /// The route's method.
    public var method: HTTPRequest.Method {
        switch self {
        case .read, .record, .currentSnapshot, .snapshot, .blob, .health, .metrics, .openAPI: .get
        case .readHead, .blobHead, .blobKept: .head
        case .put, .blobPut: .put
        case .delete: .delete
        case .batch, .push, .bakes: .post
        }
    }

    /// The route's path, `{name}` for a path parameter.
    public var path: String {
        switch self {
        case .read, .readHead, .batch: "/api/{collection}"
        case .record, .put, .delete: "/api/{collection}/{id}"
        case .push: "/push"
        case .bakes: "/bakes"
        case .currentSnapshot: "/snapshots/current/{collection}"
        case .snapshot: "/snapshots/{sha256}"
        case .blobPut, .blob, .blobHead: "/blobs/{sha256}"
        case .blobKept: "/blobs/{sha256}/upload"
        case .health: "/healthz"
        case .metrics: "/metrics"
        case .openAPI: "/openapi.json"
        }
    }
}

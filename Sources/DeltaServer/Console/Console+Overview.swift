import DeltaCore
import DeltaStore
import Foundation
import Hummingbird

/// The console's overview: the database, its collections, this server's last hour, pushes, blobs, compaction.
extension Console {
    /// `GET /console/api/overview`.
    func overview() async throws -> Response {
        let head = try await store.headPosition()
        let collections = try await statistics.value(head: head) { try await store.collectionStatistics() }
        let horizon = try await store.historyHorizon()
        let rules = try await store.currentRules()
        let bakes = try await store.bakes()
        let blobs = try await store.blobTotals()
        let traffic = metrics.traffic.summary()
        let pushed = metrics.pushedByStatus
        let lastChange = collections.compactMap(\.lastChange).max()
        let backend = String(describing: type(of: store)).contains("Postgres") ? "PostgreSQL" : "SQLite"
        return ConsoleResponse.json(
            .members([
                "database": .members([
                    "backend": .string(backend), "id": .string(String(store.databaseID, radix: 16)), "position": .int(head),
                    "lastChange": .time(lastChange), "horizon": .int(horizon), "rulesVersion": .int(rules?.version ?? 0),
                ]),
                "collections": .array(
                    collections.map { collection in
                        .members([
                            "name": .string(collection.name.rawValue), "visible": .int(collection.visible), "hidden": .int(collection.hidden),
                            "bytes": .int(collection.bytes), "lastPosition": .int(collection.lastPosition), "lastChange": .time(collection.lastChange),
                        ])
                    }),
                "traffic": .members(["minutes": .array(traffic.minutes.map(Self.json)), "hour": Self.json(traffic.total)]),
                "pushes": .object(["applied", "unchanged", "conflict", "denied", "invalid"].map { JSONMember(key: $0, value: .int(pushed[$0] ?? 0)) }),
                "blobs": .members(["count": .int(blobs.blobs), "bytes": .int(blobs.bytes)]),
                "bakes": .array(
                    bakes.map { bake in
                        .members([
                            "collection": .string(bake.collection.rawValue), "etag": .string(bake.entityTag), "position": .int(bake.position),
                            "bakedAt": .time(bake.bakedAt), "kept": .bool(bake.position >= horizon),
                        ])
                    }),
            ]))
    }

    /// One span of `TrafficHistory` as JSON.
    static func json(_ summary: TrafficHistory.Summary) -> JSONValue {
        .members([
            "start": .time(summary.start), "requests": .int(summary.requests), "notModified": .int(summary.notModified),
            "perSecond": .decimal(summary.perSecond), "p50": .decimal(summary.p50), "p99": .decimal(summary.p99),
        ])
    }
}

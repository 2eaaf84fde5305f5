import DeltaAuthoring
import DeltaClient
import DeltaCore
import DeltaServer
import DeltaStore
import DeltaTestSupport
import Foundation
import Hummingbird
import HummingbirdTesting
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A stock HTTP cache in front of the origin, configured as docs/PROTOCOL.md ("Cacheable reads") tells operators.
enum StockCache: String, CaseIterable, Sendable, CustomStringConvertible {
    case nginx
    case varnish
    var description: String { rawValue }

    /// Starts the cache on a free port in `directory`, in front of the origin on `upstream`.
    func start(directory: String, upstream: Int) async throws -> (ChildProcess, Int) {
        try await startListening { port in try launch(directory: directory, upstream: upstream, port: port) }
    }

    private func launch(directory: String, upstream: Int, port: Int) throws -> ChildProcess {
        switch self {
        case .nginx:
            let nginx = try requireProgram("nginx", package: "nginx-light")
            let config = "\(directory)/nginx.conf"
            try nginxConfiguration(
                directory: directory, connections: 1024,
                http: """
                        proxy_cache_path \(directory)/cache keys_zone=deltas:10m;
                        \(CacheConvergenceTests.nginxSnippet)
                        server {
                            listen 127.0.0.1:\(port);
                            location / {
                                proxy_pass http://127.0.0.1:\(upstream);
                                proxy_http_version 1.1;
                                proxy_cache $deltasnap_cache;
                                proxy_cache_lock on;
                                proxy_cache_lock_timeout 30s;
                            }
                        }
                    """
            ).write(toFile: config, atomically: true, encoding: .utf8)
            return try ChildProcess(nginx, ["-c", config, "-p", directory])
        case .varnish:
            let varnishd = try requireProgram("varnishd", package: "varnish")
            let vcl = "\(directory)/deltasnap.vcl"
            try """
            vcl 4.1;
            backend origin { .host = "127.0.0.1"; .port = "\(upstream)"; }
            \(CacheConvergenceTests.varnishSnippet)
            """.write(toFile: vcl, atomically: true, encoding: .utf8)
            return try ChildProcess(varnishd, ["-F", "-j", "none", "-a", "127.0.0.1:\(port)", "-f", vcl, "-n", "\(directory)/varnish", "-s", "malloc,64m"])
        }
    }
}

@Suite("Hundreds of replicas behind a stock cache", .serialized)
struct CacheConvergenceTests {
    /// What docs/PROTOCOL.md tells an nginx operator to add: cache only the cacheable reads, so
    /// that conditional reads reach the origin with their validators.
    static let nginxSnippet = #"map $arg_until $deltasnap_cache { "" off; default deltas; }"#
    /// What docs/PROTOCOL.md tells a Varnish operator to add, for the same reason.
    static let varnishSnippet = #"sub vcl_recv { if (req.url !~ "[?&]until=") { return (pass); } }"#

    static let replicas = 200
    static let inFlight = 50

    @Test(
        "200 replicas syncing from the same snapshot through nginx or Varnish converge; the origin computes each delta a handful of times at most; none gets a delta for another token",
        arguments: StockCache.allCases, Backend.available)
    func manyReplicas(cache: StockCache, backend: Backend) async throws {
        try await backend.withStore { store, directory in
            let collection = try CollectionName("items")
            _ = try await store.write(to: collection) { transaction in
                for index in 0..<300 { try await transaction.upsert(try Record(parsing: Array(#"{"id":"r\#(index)","v":0}"#.utf8))) }
            }
            let snapshot = try await Self.bake(store, collection, to: directory.appendingPathComponent("items.snapshot"))
            var configuration = ServerConfiguration()
            configuration.port = 0
            configuration.cacheableReads = true
            configuration.answerCacheBytes = 0  // every answer the cache misses is computed: counted as the cache's own work
            let app = buildApplication(store: store, earlyVerdicts: store, configuration: configuration)
            try await app.testOnServerThreads(.live) { origin in
                let originPort = try #require(origin.port)
                let cacheDirectory = try makeTemporaryDirectory("cache-\(cache)")
                defer { try? FileManager.default.removeItem(atPath: cacheDirectory) }
                let (proxy, port) = try await cache.start(directory: cacheDirectory, upstream: originPort)
                defer { Task { await proxy.stop(SIGKILL) } }
                var replicas: [Replica] = []
                for index in 0..<Self.replicas {
                    var settings = ReplicaConfiguration(
                        storeURL: directory.appendingPathComponent("replica-\(index).sqlite"), snapshotURL: snapshot,
                        serverURL: URL(string: "http://127.0.0.1:\(port)/api")!)
                    settings.initialBackoff = 0
                    settings.requestTimeout = 30
                    replicas.append(try await Replica.open(settings))
                }
                for round in 1...2 {
                    _ = try await store.write(to: collection) { transaction in
                        for index in 0..<5 { try await transaction.upsert(try Record(parsing: Array(#"{"id":"r\#(round * 7 + index)","v":\#(round)}"#.utf8))) }
                        try await transaction.hide(id: "r\(round)")
                    }
                    let computedBefore = try await Self.counter(originPort, #"deltasnap_cacheable_answers_total{source="database"}"#)
                    // 50 syncs in flight at a time: enough for concurrent misses at the cache, without
                    // starving the suites that run beside this one (their timing bounds).
                    let reports = try await withThrowingTaskGroup(of: SyncReport.self) { group in
                        var reports: [SyncReport] = []
                        for (index, replica) in replicas.enumerated() {
                            if index >= Self.inFlight, let report = try await group.next() { reports.append(report) }
                            group.addTask { try await replica.sync() }
                        }
                        for try await report in group { reports.append(report) }
                        return reports
                    }
                    let computed = try await Self.counter(originPort, #"deltasnap_cacheable_answers_total{source="database"}"#) - computedBefore
                    for report in reports {
                        let entry = try #require(report.collections.first)
                        #expect(entry.reset == nil, "round \(round): a replica reset: \(entry)")
                        #expect(entry.outcome == .applied(upserted: 5, hidden: 1), "round \(round): \(entry.outcome)")
                    }
                    // Every replica went from the same token to the same head: one distinct delta.
                    #expect(computed >= 1 && computed <= 3, "round \(round): the origin computed the delta \(computed) times for \(Self.replicas) replicas")
                    let truth = try await Self.records(store, collection)
                    for (index, replica) in replicas.enumerated() {
                        let held = Dictionary(
                            uniqueKeysWithValues: try await replica.records(in: "items").map { ($0.id, String(decoding: $0.body, as: UTF8.self)) })
                        #expect(held == truth, "round \(round): replica \(index) differs from the origin")
                    }
                    print(
                        "CacheConvergenceTests[\(cache), \(backend)] round \(round): \(Self.replicas) replicas, origin computed the delta \(computed) time(s)")
                }
                await proxy.stop(SIGKILL)
            }
        }
    }

    /// A counter's value from the origin's `/metrics` (0 when absent).
    static func counter(_ port: Int, _ name: String) async throws -> Int {
        let (data, _) = try await URLSession.shared.data(from: URL(string: "http://127.0.0.1:\(port)/metrics")!)
        let line = String(decoding: data, as: UTF8.self).split(separator: "\n").first { $0.hasPrefix(name + " ") }
        return line.flatMap { Int($0.split(separator: " ").last ?? "") } ?? 0
    }

    /// The store's visible records, id → canonical JSON.
    static func records(_ store: any ChangeStore, _ collection: CollectionName) async throws -> [String: String] {
        let read = try await store.openFullRead([collection])
        defer { read.close() }
        var records: [String: String] = [:]
        while let batch = try await read.next(collection, maximumBytes: 1 << 16) {
            try batch.forEach { body, _ in
                let record = try Record(parsing: Array(body))
                records[record.id] = String(decoding: record.body, as: UTF8.self)
            }
        }
        return records
    }

    /// Bakes the store's current `collection` into a snapshot file at `url`.
    static func bake(_ store: any ChangeStore, _ collection: CollectionName, to url: URL) async throws -> URL {
        let read = try await store.openFullRead([collection])
        defer { read.close() }
        let entry = read.collections[0]
        let manifest = try SnapshotManifest(collections: [
            .init(name: entry.name, entityTag: entry.token.entityTag, lastModified: entry.token.lastModified, records: entry.records, digest: entry.digest)
        ])
        var bytes: [UInt8] = []
        let writer = try SnapshotWriter(manifest: manifest) { bytes.append(contentsOf: $0) }
        while let batch = try await read.next(collection, maximumBytes: 1 << 16) { try batch.forEach { body, _ in try writer.append(body: body) } }
        try writer.finish()
        try Data(bytes).write(to: url)
        return url
    }
}

import DeltaAuthoring
import DeltaClient
import DeltaCore
import DeltaSQLiteStore
import DeltaServer
import DeltaStore
import DeltaTestSupport
import Foundation
import Hummingbird
import HummingbirdTesting

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The collection every client test uses.
let items = "items"
/// The key the harness's server accepts from apps, which may write `items`.
let appKey = "harness-app-key"

/// A real server (DeltaServer over a SQLite file, on loopback), a tampering proxy in front of
/// it, and a temporary directory for snapshots and replicas.
struct Harness: Sendable {
    let directory: URL
    let store: SQLiteStore
    let serverPort: Int
    let proxy: TamperingProxy
    let proxyPort: Int

    /// The API root clients use: direct, or through the proxy.
    func apiURL(viaProxy: Bool = false) -> URL { URL(string: "http://127.0.0.1:\(viaProxy ? proxyPort : serverPort)/api")! }

    /// Upserts records (JSON objects) in one commit.
    func put(_ records: String...) async throws { try await putMany(records) }

    /// Upserts many records in one commit.
    func putMany(_ records: [String]) async throws {
        let parsed = try records.map { try Record(parsing: Array($0.utf8)) }
        _ = try await store.write(to: try CollectionName(items)) { transaction in
            for record in parsed { try await transaction.upsert(record) }
        }
    }

    /// Hides records in one commit.
    func hide(_ ids: String...) async throws { try await hideMany(ids) }

    /// Hides many records in one commit.
    func hideMany(_ ids: [String]) async throws {
        _ = try await store.write(to: try CollectionName(items)) { transaction in
            for id in ids { try await transaction.hide(id: id) }
        }
    }

    /// Bakes the server's current full dataset into a snapshot file, as `deltasnap bake --url` does.
    func bake(_ name: String) async throws -> URL {
        let (data, response) = try await URLSession.shared.data(from: apiURL().appendingPathComponent(items))
        let http = response as! HTTPURLResponse
        guard http.statusCode == 200, let etag = http.value(forHTTPHeaderField: "ETag"), let lastModified = http.value(forHTTPHeaderField: "Last-Modified")
        else {
            throw TestFailure("bake: server answered \(http.statusCode)")
        }
        var body = EnvelopeReader(collection: try CollectionName(items))
        try body.feed(Array(data))
        try body.finish()
        var records: [Record] = []
        while let record = try body.next() { records.append(record) }
        let manifest = try SnapshotManifest(collections: [
            .init(name: try CollectionName(items), entityTag: etag, lastModified: lastModified, records: records.count)
        ])
        var bytes: [UInt8] = []
        let writer = try SnapshotWriter(manifest: manifest) { bytes.append(contentsOf: $0) }
        for record in records { try writer.append(body: record.body) }
        try writer.finish()
        let url = directory.appendingPathComponent("\(name).snapshot")
        try Data(bytes).write(to: url)
        return url
    }

    /// A replica configuration in the harness's directory, with a short back-off for tests.
    func configuration(_ replica: String = "replica", snapshot: URL, viaProxy: Bool = false) -> ReplicaConfiguration {
        var configuration = ReplicaConfiguration(
            storeURL: directory.appendingPathComponent("\(replica).sqlite"), snapshotURL: snapshot, serverURL: apiURL(viaProxy: viaProxy))
        configuration.initialBackoff = 0
        // Generous: this machine sometimes stalls for over ten seconds while the whole suite
        // runs (docs/RELIABILITY.md); tests of timeouts set their own short ones.
        configuration.requestTimeout = 30
        configuration.clientKey = appKey
        return configuration
    }

    /// The server's visible records, id → canonical JSON.
    func serverRecords() async throws -> [String: String] {
        let (data, _) = try await URLSession.shared.data(from: apiURL().appendingPathComponent(items))
        var body = EnvelopeReader(collection: try CollectionName(items))
        try body.feed(Array(data))
        try body.finish()
        var records: [String: String] = [:]
        while let record = try body.next() { records[record.id] = String(decoding: record.body, as: UTF8.self) }
        return records
    }
}

extension Replica {
    /// The replica's visible records of the test collection, id → canonical JSON.
    func contents() async throws -> [String: String] {
        Dictionary(uniqueKeysWithValues: try await records(in: items).map { ($0.id, String(decoding: $0.body, as: UTF8.self)) })
    }
}

/// Runs `body` with a fresh server, proxy and directory.
func withHarness(
    databaseID: UInt64? = nil, configure: (inout ServerConfiguration) -> Void = { _ in }, _ body: @escaping @Sendable (Harness) async throws -> Void
) async throws {
    let directory = URL(fileURLWithPath: try makeTemporaryDirectory("deltaclient"))
    defer { try? FileManager.default.removeItem(at: directory) }
    var storeConfiguration = SQLiteStore.Configuration()
    storeConfiguration.newDatabaseID = databaseID
    let store = try SQLiteStore(path: directory.appendingPathComponent("server.sqlite").path, configuration: storeConfiguration)
    var configuration = ServerConfiguration()
    configuration.port = 0
    configuration.clientKey = appKey
    configuration.clientWritable = [items]
    configure(&configuration)
    let server = buildApplication(store: store, earlyVerdicts: store, configuration: configuration)
    try await server.testOnServerThreads(.live) { serverClient in
        let proxy = TamperingProxy(upstream: serverClient.port!)
        let proxyApp = Application(router: proxy.router(), configuration: .init(address: .hostname("127.0.0.1", port: 0)))
        try await proxyApp.testOnServerThreads(.live) { proxyClient in
            try await body(Harness(directory: directory, store: store, serverPort: serverClient.port!, proxy: proxy, proxyPort: proxyClient.port!))
        }
    }
    try await store.close()
}

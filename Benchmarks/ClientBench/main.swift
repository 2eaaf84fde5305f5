// The client API's latencies (issue 23), run by Scripts/bench-live against a `deltasnap serve`:
//   deltasnap-bench-live SNAPSHOT API_URL WRITE_TOKEN STORE [ROUNDS]
// Prints one line per measure: name, median and p99 in milliseconds, and what it was compared with.
import Crypto
import DeltaClient
import DeltaCore
import DeltaSQLite
import Foundation
import Observation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

struct Item: Codable, Sendable, Identifiable {
    let id: String
    let name: String
    let category: String
    let price: Double
    let stock: Int
    let tags: [String]
    let description: String
    let v: Int?
}

func milliseconds(_ duration: Duration) -> Double { Double(duration.components.attoseconds) / 1e15 + Double(duration.components.seconds) * 1000 }
func percentile(_ values: [Double], _ p: Double) -> Double {
    let sorted = values.sorted()
    return sorted[min(sorted.count - 1, Int((Double(sorted.count) * p).rounded(.up)) - 1)]
}
func report(_ name: String, _ values: [Double], _ note: String = "") {
    print(
        String(
            format: "%@\tmedian %.2f ms\tp99 %.2f ms\t(%d runs)%@", name, percentile(values, 0.5), percentile(values, 0.99), values.count,
            note.isEmpty ? "" : "\t" + note))
}

/// SHA-256 of one record and of 1 MiB: the replica's one-shot per-record hash (`StateDigest.element`,
/// SHA-NI on this CPU), DeltaCore's portable code (what an iPhone runs), and swift-crypto's
/// (BoringSSL here, CryptoKit on Apple platforms), each ending in a `StateDigest`.
func hashing() {
    let clock = ContinuousClock()
    // SHA-256: DeltaCore's (x86 SHA-NI when the CPU has it, else portable Swift) against swift-crypto's.
    for size in [200, 1 << 20] {
        let bytes = (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        let repeats = size == 200 ? 200_000 : 200
        var fastest: [Double] = []
        var portable: [Double] = []
        var crypto: [Double] = []
        var sink: UInt8 = 0
        let reference = StateDigest.element([UInt8]())
        for _ in 0..<7 {
            var start = clock.now
            for _ in 0..<repeats where StateDigest.element(bytes) == reference { sink ^= 1 }
            fastest.append(milliseconds(clock.now - start))
            start = clock.now
            for _ in 0..<repeats {
                var hasher = DeltaCore.SHA256(implementation: .portable)
                hasher.update(bytes)
                sink ^= hasher.finalize()[0]
            }
            portable.append(milliseconds(clock.now - start))
            start = clock.now
            for _ in 0..<repeats {
                let digest = Crypto.SHA256.hash(data: bytes)
                // The four big-endian words a StateDigest holds, read without allocating.
                sink ^= digest.withUnsafeBytes { raw in
                    UInt8(truncatingIfNeeded: (0..<4).reduce(0) { $0 ^ UInt64(bigEndian: raw.loadUnaligned(fromByteOffset: $1 * 8, as: UInt64.self)) })
                }
            }
            crypto.append(milliseconds(clock.now - start))
        }
        let rate = { (ms: Double) in Double(size * repeats) / (ms / 1000) / 1e6 }
        let (f, p, c) = (percentile(fastest, 0.5), percentile(portable, 0.5), percentile(crypto, 0.5))
        print(
            "SHA-256 of \(size) bytes ×\(repeats), medians of 7: DeltaCore one-shot (StateDigest.element, SHA-NI) \(Int(rate(f))) MB/s, DeltaCore portable \(Int(rate(p))) MB/s, "
                + "swift-crypto \(Int(rate(c))) MB/s; swift-crypto takes \(String(format: "%.2f", c / f))× the one-shot time and \(String(format: "%.2f", c / p))× the portable time"
                + (sink == 42 ? " " : ""))
    }
}

let arguments = CommandLine.arguments
if arguments.count == 2 && arguments[1] == "--hash-only" {
    hashing()
    exit(0)
}
if arguments.count >= 5 && arguments[1] == "query" {
    let rounds = arguments.count > 5 ? Int(arguments[5]) ?? 100 : 100
    try await queryBench(
        big: URL(fileURLWithPath: arguments[2]), small: URL(fileURLWithPath: arguments[3]), directory: URL(fileURLWithPath: arguments[4]), rounds: rounds)
    exit(0)
}
guard arguments.count >= 5 else {
    FileHandle.standardError.write(
        Data("usage: deltasnap-bench-live SNAPSHOT API_URL WRITE_TOKEN STORE [ROUNDS] | query BIG_SNAPSHOT SMALL_SNAPSHOT DIRECTORY [ROUNDS]\n".utf8))
    exit(2)
}
let rounds = arguments.count > 5 ? Int(arguments[5]) ?? 100 : 100
let api = URL(string: arguments[2])!
var configuration = ReplicaConfiguration(storeURL: URL(fileURLWithPath: arguments[4]), snapshotURL: URL(fileURLWithPath: arguments[1]), serverURL: api)
configuration.indexes = ["items": ["category"]]
let clock = ContinuousClock()
let opened = clock.now
let replica = try await Replica.open(configuration)
FileHandle.standardError.write(Data("bench-live: opened (installing the snapshot) in \(clock.now - opened)\n".utf8))
_ = try await replica.sync()

// 1,000 rows of one category (about 10,300 match), by id: read through the category index.
let query = RecordQuery("items", filter: .compare(member: "category", .eq, "cat-5"), limit: 1000)
let live = await MainActor.run { LiveQuery(replica, query) }
while await MainActor.run(body: { !live.isLoaded }) { try await Task.sleep(for: .milliseconds(1)) }

// A delta that changes the query's result: from the start of sync() (an HTTP round trip, the
// delta applied and committed) to the LiveQuery's new value; and the sync() alone beside it.
var deltaToLive: [Double] = []
var syncAlone: [Double] = []
for round in 0..<rounds {
    let marker = 1_000_000 + round
    var request = URLRequest(url: api.appendingPathComponent("items"))
    request.httpMethod = "POST"
    request.setValue("Bearer \(arguments[3])", forHTTPHeaderField: "Authorization")
    request.setValue("application/json", forHTTPHeaderField: "Content-Type")
    request.httpBody = Data(
        #"[{"category":"cat-5","description":"changed","id":"rec0000005","name":"Record number 5","price":5.05,"stock":5,"tags":["t5","t5"],"v":\#(marker)}]"#
            .utf8)
    let (_, response) = try await URLSession.shared.data(for: request)
    guard (response as? HTTPURLResponse)?.statusCode == 200 else { fatalError("write refused: \(response)") }
    let start = clock.now
    _ = try await replica.sync()
    syncAlone.append(milliseconds(clock.now - start))
    await waitForMarker(marker, in: "rec0000005", of: live)
    deltaToLive.append(milliseconds(clock.now - start))
}
report("delta to LiveQuery (1,000-row query)", deltaToLive)
report("  of which sync() itself", syncAlone)

// A local put that changes the result, to the LiveQuery's new value; the put alone beside it.
let (putToLiveTimes, putAlone) = try await putToLive(replica, live, rounds: rounds, firstMarker: 2_000_000, price: 1)
report("local put to LiveQuery (1,000-row query)", putToLiveTimes)
report("  of which put() itself", putAlone)

// The query itself, raw and typed.
var raw: [Double] = []
var typed: [Double] = []
let collection = replica.collection(Item.self, named: "items")
for _ in 0..<max(rounds / 2, 10) {
    var start = clock.now
    let records = try await replica.query(query)
    raw.append(milliseconds(clock.now - start))
    start = clock.now
    let models = try await collection.query(filter: query.filter, limit: 1000)
    typed.append(milliseconds(clock.now - start))
    precondition(records.count == 1000 && models.items.count == 1000 && models.skipped.isEmpty)
}
report("query, 1,000 rows as raw records", raw)
report("query, 1,000 rows typed (Codable)", typed, String(format: "ratio of medians %.2f", percentile(typed, 0.5) / percentile(raw, 0.5)))

// The main actor while a 10,000-record delta and a 1,000,000-record reset run: a ticker on the
// main actor asks to wake every millisecond; how late it wakes is how long the main thread was
// kept from its work. Baseline: the same ticker while nothing runs.
@MainActor final class Ticker {
    var lateness: [Double] = []
    var running = true
    func run() async {
        let clock = ContinuousClock()
        while running {
            let before = clock.now
            try? await Task.sleep(for: .milliseconds(1))
            lateness.append(milliseconds(clock.now - before) - 1)
        }
    }
}

/// Runs `work` with a main-actor ticker beside it; the ticker's lateness.
func mainActorLateness(during work: () async throws -> Void) async throws -> [Double] {
    let ticker = await MainActor.run { Ticker() }
    let ticking = Task { @MainActor in await ticker.run() }
    try await work()
    await MainActor.run { ticker.running = false }
    await ticking.value
    return await MainActor.run { ticker.lateness }
}

let idle = try await mainActorLateness { try await Task.sleep(for: .seconds(2)) }
report("main actor's lateness, nothing running (baseline)", idle)
var delta: [String] = []
for index in 0..<10_000 {
    delta.append(
        #"{"category":"cat-\#(index % 97)","description":"delta","id":"rec\#(String(format: "%07d", index * 97 + 11))","name":"n","price":1,"stock":1,"tags":[],"v":3}"#
    )
}
var write = URLRequest(url: api.appendingPathComponent("items"))
write.httpMethod = "POST"
write.setValue("Bearer \(arguments[3])", forHTTPHeaderField: "Authorization")
write.setValue("application/json", forHTTPHeaderField: "Content-Type")
write.httpBody = Data("[\(delta.joined(separator: ","))]".utf8)
let (_, written) = try await URLSession.shared.data(for: write)
guard (written as? HTTPURLResponse)?.statusCode == 200 else { fatalError("the 10,000-record write was refused: \(written)") }
var applied: SyncReport?
let duringDelta = try await mainActorLateness { applied = try await replica.sync() }
report("main actor's lateness during a 10,000-record delta's sync()", duringDelta, "\(applied?.collections.first?.outcome ?? .notModified)")
// A token of another database makes the next sync reset: the snapshot's 1,000,000 records restored.
do {
    let store = try Connection(path: arguments[4], mode: .readWrite)
    try store.execute(#"UPDATE collections SET etag = 'W/"1.0000000000000001.1.00000001"'"#)
}
var reset: SyncReport?
let duringReset = try await mainActorLateness { reset = try await replica.sync() }
report("main actor's lateness during a 1,000,000-record reset's sync()", duringReset, "\(reset?.collections.first?.reset.map { "\($0)" } ?? "no reset")")

hashing()
exit(0)

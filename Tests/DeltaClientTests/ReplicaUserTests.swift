import DeltaAuthoring
import DeltaClient
import DeltaCore
import DeltaRules
import DeltaSQLite
import DeltaSQLiteStore
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

/// A server with users and rules: `notes` are each user's own (stamped), `airports` public.
struct UserHarness: Sendable {
    static let secret = "user-secret-0123456789abcdef-0123456789"
    static let ownerSecret = "owner-secret-123"
    static let rules = #"""
        {"collections": {"airports": {"read": true},
          "notes": {"read": {"owner": {"eq": {"$claim": "sub"}}}, "write": {"owner": {"eq": {"$claim": "sub"}}}, "stamp": {"owner": {"$claim": "sub"}}}}}
        """#

    let directory: URL
    let store: SQLiteStore
    let port: Int
    var api: URL { URL(string: "http://127.0.0.1:\(port)/api")! }

    /// An HS256 token for `sub`, valid for `ttl` seconds (negative: already expired).
    static func token(_ sub: String, ttl: Int64 = 3600) async throws -> String {
        let now = Int64(Date().timeIntervalSince1970)
        return try await DevelopmentToken.sign(
            try JSONValue(parsing: Array(#"{"exp":\#(now + ttl),"iat":\#(now - 120),"sub":"\#(sub)"}"#.utf8)), secret: secret)
    }

    /// Credentials for `sub` whose first token has expired; `asked` counts the tokens given.
    static func expiredFirst(_ sub: String, _ asked: Locked<Int>) -> @Sendable () async throws -> String? {
        {
            let first = asked.withLock { count -> Bool in
                count += 1
                return count == 1
            }
            return try await token(sub, ttl: first ? -3600 : 3600)
        }
    }

    /// Writes records to `collection` as the owner.
    func put(_ collection: String, _ records: String...) async throws {
        let parsed = try records.map { try Record(parsing: Array($0.utf8)) }
        _ = try await store.write(to: try CollectionName(collection)) { transaction in for record in parsed { try await transaction.upsert(record) } }
    }

    /// A snapshot of both collections as an app bundles them: the public airports whole, the
    /// users' notes empty (at the owner's token: the first sync of a user resets it to theirs);
    /// with `blobs`, format 2.0 carrying the bytes of those the airports reference.
    func bake(blobs: [BlobHash: [UInt8]] = [:]) async throws -> URL {
        let read = try await store.openFullRead([try CollectionName("airports"), try CollectionName("notes")])
        defer { read.close() }
        var airports: [[UInt8]] = []
        while let batch = try await read.next(try CollectionName("airports"), maximumBytes: 1 << 16) {
            batch.forEach { body, _ in airports.append(Array(body)) }
        }
        let manifest = try SnapshotManifest(
            collections: read.collections.map { entry in
                let isPublic = entry.name.rawValue == "airports"
                return .init(
                    name: entry.name, entityTag: entry.token.entityTag, lastModified: entry.token.lastModified, records: isPublic ? airports.count : 0,
                    digest: isPublic ? entry.digest : .empty)
            }, blobs: !blobs.isEmpty)
        var bytes: [UInt8] = []
        let writer = try SnapshotWriter(manifest: manifest) { bytes.append(contentsOf: $0) }
        for body in airports { try writer.append(body: body) }
        for reference in writer.referencedBlobs {
            var bytes = blobs[reference.hash]
            try writer.appendBlob(reference) {
                defer { bytes = nil }
                return bytes
            }
        }
        try writer.finish()
        let url = directory.appendingPathComponent("bundle.snapshot")
        try Data(bytes).write(to: url)
        return url
    }

    func configuration(_ name: String, snapshot: URL, credentials: (@Sendable () async throws -> String?)?) -> ReplicaConfiguration {
        var configuration = ReplicaConfiguration(storeURL: directory.appendingPathComponent("\(name).sqlite"), snapshotURL: snapshot, serverURL: api)
        configuration.initialBackoff = 0
        configuration.requestTimeout = 30
        configuration.credentials = credentials
        return configuration
    }

    /// Uploads `bytes` as a blob with the owner's secret: the reference a record puts in a member.
    func uploadBlob(_ bytes: Data, type: String) async throws -> BlobReference {
        var request = URLRequest(url: api.deletingLastPathComponent().appendingPathComponent("blobs/\(BlobHash.of(Array(bytes)).hex)"))
        request.httpMethod = "PUT"
        request.setValue("Bearer \(Self.ownerSecret)", forHTTPHeaderField: "Authorization")
        request.setValue(type, forHTTPHeaderField: "Content-Type")
        let (answer, _) = try await URLSession.shared.upload(for: request, from: bytes)
        return try BlobReference(try JSONValue(parsing: Array(answer)))
    }

    /// The server's notes as the owner sees them.
    func notes() async throws -> [String: String] {
        var request = URLRequest(url: api.appendingPathComponent("notes"))
        request.setValue("Bearer \(Self.ownerSecret)", forHTTPHeaderField: "Authorization")
        let (data, _) = try await URLSession.shared.data(for: request)
        guard case .object(let members) = try JSONValue(parsing: Array(data)), case .array(let items) = members.first?.value else { return [:] }
        var out: [String: String] = [:]
        for item in items { if case .string(let id)? = item["id"] { out[id] = String(decoding: item.canonicalBytes, as: UTF8.self) } }
        return out
    }
}

/// With `grants`, the server sends users' changed reads to granted cacheable reads (`307`).
/// With `appKey`, apps may push to `notes` with that client key too.
func withUserHarness(grants: Bool = false, appKey: String? = nil, _ body: @escaping @Sendable (UserHarness) async throws -> Void) async throws {
    let directory = URL(fileURLWithPath: try makeTemporaryDirectory("deltaclient-users"))
    defer { try? FileManager.default.removeItem(at: directory) }
    let store = try SQLiteStore(path: directory.appendingPathComponent("server.sqlite").path)
    var configuration = ServerConfiguration()
    configuration.port = 0
    configuration.writeToken = UserHarness.ownerSecret
    let rules = try Rules(parsing: Array(UserHarness.rules.utf8))
    configuration.rules = StoredRules(version: try await store.installRules(rules), rules: rules)
    configuration.authenticator = try await Authenticator(secret: UserHarness.secret, jwks: nil)
    if let appKey {
        configuration.clientKey = appKey
        configuration.clientWritable = ["notes"]
    }
    if grants {
        configuration.cacheableReads = true
        configuration.readGrants = ReadGrants(key: try await store.grantKey(), lifetime: 3600)
    }
    let server = buildApplication(store: store, earlyVerdicts: store, configuration: configuration)
    try await server.testOnServerThreads(.live) { client in
        try await body(UserHarness(directory: directory, store: store, port: client.port!))
    }
    try await store.close()
}

extension Replica {
    /// Visible records of `collection`, id → canonical JSON.
    func records(_ collection: String) async throws -> [String: String] {
        Dictionary(uniqueKeysWithValues: try await records(in: collection).map { ($0.id, String(decoding: $0.body, as: UTF8.self)) })
    }
}

@Suite("Replica with a signed-in user: credentials, denied writes kept, sign-out, another user")
struct ReplicaUserTests {
    @Test("Signing out while a sync runs: the sync is cancelled and awaited, and nothing it would have pulled is there after the sign-out")
    func signOutDuringSync() async throws {
        try await withUserHarness { harness in
            try await harness.put("airports", #"{"id":"p1","name":"Paris"}"#)
            for index in 0..<20 { try await harness.put("notes", #"{"id":"a\#(index)","owner":"ada","text":"hers"}"#) }
            let snapshot = try await harness.bake()
            let entered = Locked(false)
            let configuration = harness.configuration("busy", snapshot: snapshot) {
                // The app's session is slow to answer: the sync waits here while the sign-out runs.
                entered.withLock { $0 = true }
                try await Task.sleep(for: .milliseconds(300))
                return try await UserHarness.token("ada")
            }
            let replica = try await Replica.open(configuration)
            let sync = Task { try await replica.sync() }
            while !entered.withLock({ $0 }) { try await Task.sleep(for: .milliseconds(5)) }
            try await replica.signOut(discardingPendingWrites: true)
            _ = try? await sync.value
            await #expect(try replica.records("notes").isEmpty, "the sync's pull landed after the sign-out")
            await #expect(try replica.records("airports").keys.sorted() == ["p1"])
            var offline = configuration
            offline.credentials = nil
            await #expect(try Replica.open(offline).records("notes").isEmpty)
        }
    }

    @Test("The app's session moving to another user is seen at the next sync: the previous user is signed out before any request")
    func userSwitchThroughCredentials() async throws {
        try await withUserHarness { harness in
            try await harness.put("airports", #"{"id":"p1","name":"Paris"}"#)
            try await harness.put("notes", #"{"id":"a1","owner":"ada","text":"hers"}"#, #"{"id":"b1","owner":"bob","text":"his"}"#)
            let snapshot = try await harness.bake()
            let session = Locked("ada")
            let replica = try await Replica.open(
                harness.configuration("shared", snapshot: snapshot) { try await UserHarness.token(session.withLock { $0 }) })
            _ = try await replica.sync()
            await #expect(try replica.records("notes").keys.sorted() == ["a1"])
            // No sign-out call, no invalidation: the app's credentials now give Bob's token.
            session.withLock { $0 = "bob" }
            _ = try await replica.sync()
            await #expect(try replica.records("notes").keys.sorted() == ["b1"], "Bob reads Ada's notes")
            replica.invalidateCredentials()
            session.withLock { $0 = "ada" }
            _ = try await replica.sync()
            await #expect(try replica.records("notes").keys.sorted() == ["a1"])
        }
    }

    @Test("An install that pushed with the client key takes a new client id at its first sign-in: the user's pushes are not refused as client-owned")
    func firstSignInAfterAnonymousPushes() async throws {
        try await withUserHarness(appKey: "app-key-12345") { harness in
            try await harness.put("airports", #"{"id":"p1","name":"Paris"}"#)
            try await harness.put("notes", #"{"id":"b1","owner":"bob","text":"bob's"}"#)
            let snapshot = try await harness.bake()
            let user = Locked<String?>(nil)
            var configuration = harness.configuration("install", snapshot: snapshot) {
                guard let sub = user.withLock({ $0 }) else { return nil }
                return try await UserHarness.token(sub)
            }
            configuration.clientKey = "app-key-12345"
            let replica = try await Replica.open(configuration)
            try await replica.put(try Record(parsing: Array(#"{"id":"x1","owner":"nobody","text":"before"}"#.utf8)), in: "notes")
            _ = try await replica.sync()
            let anonymous = replica.clientID
            #expect(try await harness.notes()["x1"] != nil, "pushed with the client key")
            user.withLock { $0 = "ada" }
            try await replica.put(try Record(parsing: Array(#"{"id":"a1","text":"after"}"#.utf8)), in: "notes")
            _ = try await replica.sync()
            #expect(replica.clientID != anonymous)
            #expect(try await harness.notes()["a1"] == #"{"id":"a1","owner":"ada","text":"after"}"#)
            #expect(try await replica.rejected().isEmpty)
        }
    }

    @Test("A user's replica holds their notes and the public airports; an expired token is refreshed once; stamps and denials come back")
    func credentials() async throws {
        try await withUserHarness { harness in
            try await harness.put("airports", #"{"id":"p1","name":"Paris"}"#)
            try await harness.put("notes", #"{"id":"a1","owner":"ada"}"#, #"{"id":"b1","owner":"bob"}"#)
            let snapshot = try await harness.bake()
            let asked = Locked(0)
            let replica = try await Replica.open(harness.configuration("ada", snapshot: snapshot, credentials: UserHarness.expiredFirst("ada", asked)))
            _ = try await replica.sync()
            await #expect(try replica.records("notes") == ["a1": #"{"id":"a1","owner":"ada"}"#])
            await #expect(try replica.records("airports").keys.sorted() == ["p1"])
            #expect(asked.withLock { $0 } == 2)  // the expired one, then a fresh one after 401 token-expired

            try await replica.put(Record(parsing: Array(#"{"id":"n1","owner":"mallory","text":"mine"}"#.utf8)), in: "notes")
            try await replica.put(Record(parsing: Array(#"{"id":"b1","owner":"ada","text":"taken"}"#.utf8)), in: "notes")
            let report = try await replica.sync()
            #expect(report.pushed.applied == 1)
            #expect(try await harness.notes()["n1"] == #"{"id":"n1","owner":"ada","text":"mine"}"#)
            #expect(try await harness.notes()["b1"] == #"{"id":"b1","owner":"bob"}"#)
            let rejected = try await replica.rejected()
            #expect(rejected.map(\.id) == ["b1"])
            #expect(rejected.first?.reason == "denied: write")
            #expect(rejected.first?.server == nil)  // Bob's note is not Ada's to see
            await #expect(try replica.records("notes")["b1"] == #"{"id":"b1","owner":"ada","text":"taken"}"#)  // kept visible until discarded
        }
    }

    @Test("Without credentials the public collections sync and the users' ones keep their data: no failure, no back-off")
    func anonymous() async throws {
        try await withUserHarness { harness in
            try await harness.put("airports", #"{"id":"p1","name":"Paris"}"#)
            try await harness.put("notes", #"{"id":"a1","owner":"ada"}"#)
            let snapshot = try await harness.bake()
            let replica = try await Replica.open(harness.configuration("guest", snapshot: snapshot, credentials: nil))
            try await harness.put("airports", #"{"id":"p2","name":"Oslo"}"#)
            let report = try await replica.sync()
            #expect(report.collections.first { $0.collection == "notes" }?.outcome == .signInRequired)
            await #expect(try replica.records("airports").keys.sorted() == ["p1", "p2"])
            await #expect(try replica.records("notes").isEmpty)
            #expect(try await replica.sync().collections.count == 2)  // no back-off after it
        }
    }

    @Test("Sign-out refuses with unsettled writes, then empties the user's collections and the outbox, keeps the public ones, and gives a new client id")
    func signOut() async throws {
        try await withUserHarness { harness in
            try await harness.put("airports", #"{"id":"p1","name":"Paris"}"#)
            try await harness.put("notes", #"{"id":"a1","owner":"ada"}"#)
            let snapshot = try await harness.bake()
            let replica = try await Replica.open(harness.configuration("ada", snapshot: snapshot) { try await UserHarness.token("ada") })
            _ = try await replica.sync()
            try await replica.put(Record(parsing: Array(#"{"id":"a2","text":"draft"}"#.utf8)), in: "notes")
            let client = replica.clientID
            await #expect(throws: ReplicaError.self) { try await replica.signOut() }
            await #expect(try replica.records("notes").keys.sorted() == ["a1", "a2"])
            try await replica.signOut(discardingPendingWrites: true)
            await #expect(try replica.records("notes").isEmpty)
            await #expect(try replica.records("airports").keys.sorted() == ["p1"])
            await #expect(try replica.conflicts().isEmpty)
            #expect(replica.clientID != client)
        }
    }

    /// Debian's SQLite zeroes deleted rows by default (built with `SQLITE_SECURE_DELETE`); Apple's
    /// and others' need the replica's `PRAGMA secure_delete=ON`. Checked failing with the pragma
    /// set `OFF` (free pages), and without the sign-out's final checkpoint (the logs).
    @Test(
        "After a sign-out no byte of the user's rows, pending writes or search index is left in the store's files, free pages and logs included",
        arguments: [true, false])
    func signOutLeavesNoBytes(checkpointed: Bool) async throws {
        try await withUserHarness { harness in
            try await harness.put("airports", #"{"id":"p1","name":"Paris"}"#)
            // One word (the search index keeps words, not the text): its end is found in the
            // index's pages too, which store words prefix-compressed.
            let marker = "adasecret" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased()
            let tail = String(marker.suffix(16))
            // Enough rows to fill many pages, each carrying the marker.
            for batch in 0..<4 {
                let rows = (0..<250).map { #"{"id":"a\#(batch)-\#($0)","owner":"ada","text":"\#(marker) \#(String(repeating: "x", count: 200))"}"# }
                let parsed = try rows.map { try Record(parsing: Array($0.utf8)) }
                _ = try await harness.store.write(to: try CollectionName("notes")) { transaction in
                    for record in parsed { try await transaction.upsert(record) }
                }
            }
            let snapshot = try await harness.bake()
            var configuration = harness.configuration("ada", snapshot: snapshot) { try await UserHarness.token("ada") }
            configuration.searchable = ["notes": ["text"]]
            let replica = try await Replica.open(configuration)
            _ = try await replica.sync()
            #expect(try await replica.count(in: "notes") == 1000)
            #expect(try await replica.search(marker, in: "notes", limit: 5).count == 5)
            try await replica.put(Record(parsing: Array(#"{"id":"draft","text":"\#(marker) pending"}"#.utf8)), in: "notes")
            // As SQLite does on its own once a log grows: the pages reach the files themselves, so
            // that only zeroing deleted rows (not the log's truncation) can make them go. Without
            // it, they are in the logs, and only the sign-out's checkpoint can make them go.
            for path in [configuration.storeURL.path, configuration.storeURL.path + "-outbox"] where checkpointed {
                _ = try Connection(path: path, mode: .readWrite).integer("PRAGMA wal_checkpoint(TRUNCATE)")
            }
            let files = ["", "-wal", "-shm", "-outbox", "-outbox-wal", "-outbox-shm"].map { configuration.storeURL.path + $0 }
            func leaks() -> [String] {
                files.filter { path in
                    guard let bytes = FileManager.default.contents(atPath: path) else { return false }
                    return bytes.range(of: Data(tail.utf8)) != nil
                }
            }
            #expect(!leaks().isEmpty, "the marker must be found before the sign-out, or this test proves nothing")
            try await replica.signOut(discardingPendingWrites: true)
            #expect(leaks() == [])
            await #expect(try replica.records("airports").keys.sorted() == ["p1"])
        }
    }

    @Test("Another user's token signs the previous one out: only the restricted collections reset, and the new user's rows arrive")
    func userSwitch() async throws {
        try await withUserHarness { harness in
            try await harness.put("airports", #"{"id":"p1","name":"Paris"}"#)
            try await harness.put("notes", #"{"id":"a1","owner":"ada"}"#, #"{"id":"b1","owner":"bob"}"#)
            let snapshot = try await harness.bake()
            let who = Locked("ada")
            let replica = try await Replica.open(harness.configuration("device", snapshot: snapshot) { try await UserHarness.token(who.withLock { $0 }) })
            _ = try await replica.sync()
            await #expect(try replica.records("notes").keys.sorted() == ["a1"])
            who.withLock { $0 = "bob" }
            // The kept token is Ada's until the app's credentials are asked again: a new replica
            // object (an app relaunch) asks at once.
            let relaunched = try await Replica.open(harness.configuration("device", snapshot: snapshot) { try await UserHarness.token(who.withLock { $0 }) })
            _ = try await relaunched.sync()
            await #expect(try relaunched.records("notes").keys.sorted() == ["b1"])
            await #expect(try relaunched.records("airports").keys.sorted() == ["p1"])
        }
    }
}

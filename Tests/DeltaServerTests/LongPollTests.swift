import DeltaCore
import DeltaServer
import DeltaStore
import DeltaTestSupport
import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
import Testing

@Suite("Live updates: ?wait=SECONDS")
struct LongPollTests {
    /// A commit to `collection` through the store, after `delay`.
    /// Commits `json` after `delay`; the task's value is the moment the commit returned. Wake-ups are
    /// timed from then: the commit's own fsync can take seconds on a loaded machine.
    static func commit(_ store: any ChangeStore, _ collection: String, _ json: String, after delay: Duration) -> Task<ContinuousClock.Instant, any Error> {
        Task {
            try await Task.sleep(for: delay)
            _ = try await store.write(to: try CollectionName(collection)) { try await $0.upsert(try Record(parsing: Array(json.utf8))) }
            return ContinuousClock.now
        }
    }

    @Test(
        "A held 304 wakes within a second of a commit to its collection and answers the delta; a commit elsewhere does not wake it; it answers 304 at its deadline",
        arguments: Backend.available)
    func wakesOnCommit(backend: Backend) async throws {
        try await withServer(.loopback, backend: backend) { client, store in
            let first = try await client.write(.post, "/api/widgets", #"[{"id":"a"}]"#)
            #expect(first.status == .ok)
            let tag = try #require(try await client.get("/api/widgets").headers[.eTag])
            // Nothing commits: 304 once the wait is over, not before.
            var started = ContinuousClock.now
            let quiet = try await client.get("/api/widgets?wait=1", [.ifNoneMatch: tag])
            #expect(quiet.status == .notModified)
            #expect(ContinuousClock.now - started >= .milliseconds(900))
            // A commit to another collection: still 304 at the deadline.
            let elsewhere = Self.commit(store, "gadgets", #"{"id":"g"}"#, after: .milliseconds(200))
            started = ContinuousClock.now
            #expect(try await client.get("/api/widgets?wait=1", [.ifNoneMatch: tag]).status == .notModified)
            #expect(ContinuousClock.now - started >= .milliseconds(900))
            _ = try await elsewhere.value
            // A commit to this collection: the delta, well within a second of it.
            let write = Self.commit(store, "widgets", #"{"id":"b"}"#, after: .milliseconds(300))
            started = ContinuousClock.now
            let woken = try await client.get("/api/widgets?wait=\(liveWait)", [.ifNoneMatch: tag])
            let answered = ContinuousClock.now
            let committed = try await write.value
            #expect(woken.status == .ok)
            #expect(woken.headers[HTTPField.Name("Delta-Mode")!] == "delta")
            #expect(String(buffer: woken.body) == #"{"widgets":[{"id":"b"}]}"#)
            #expect(answered - started < .seconds(liveWait), "the wait ran out instead of waking")
            print("live updates within 1 s: LongPollTests(\(backend)): answered \(answered - committed) after the commit")
            #expect(answered - committed < wakeBound, "answered \(answered - committed) after the commit returned")
            // HEAD answers as GET would, without the body: a live client's probe.
            let head = try await client.execute(uri: "/api/widgets", method: .head, headers: [.ifNoneMatch: tag])
            #expect(head.status == .ok && head.body.readableBytes == 0 && head.headers[HTTPField.Name("Delta-Mode")!] == "delta")
            #expect(
                try await client.execute(uri: "/api/widgets", method: .head, headers: [.ifNoneMatch: try #require(woken.headers[.eTag])]).status == .notModified
            )
            // Bad waits are refused; waits past the maximum wait the maximum.
            for bad in ["x", "-1", "1.5", "9999999"] {
                let refused = try await client.get("/api/widgets?wait=\(bad)", [.ifNoneMatch: tag])
                #expect(refused.status == .badRequest && String(buffer: refused.body).contains("invalid-wait"), "\(bad)")
            }
        }
    }

    @Test("Past the bound on held requests, a wait gets 503 with Retry-After instead of holding a connection")
    func boundOnWaiting() async throws {
        try await withServer(.loopback, configure: { $0.maximumWaiting = 0 }) { client, _ in
            _ = try await client.write(.post, "/api/widgets", #"[{"id":"a"}]"#)
            let tag = try #require(try await client.get("/api/widgets").headers[.eTag])
            let refused = try await client.get("/api/widgets?wait=5", [.ifNoneMatch: tag])
            #expect(refused.status == .serviceUnavailable)
            #expect(refused.headers[.retryAfter] == "1")
            #expect(String(buffer: refused.body).contains("too-many-waiting"))
            // Without wait, or when the answer is not a 304, nothing is held or refused.
            #expect(try await client.get("/api/widgets", [.ifNoneMatch: tag]).status == .notModified)
            #expect(try await client.get("/api/widgets?wait=5").status == .ok)
        }
    }
}

extension LongPollTests {
    @Test(
        "A selection's wait stays held through a commit outside it and wakes for one inside it; a writing client's wait answers with Delta-Last-Mutation; with cacheable reads it wakes into the 307",
        arguments: Backend.available)
    func selectionsAndWritingClients(backend: Backend) async throws {
        try await withServer(
            .loopback, backend: backend,
            configure: {
                $0.clientKey = "client-key-456"
                $0.clientWritable = ["widgets"]
                $0.cacheableReads = true
            }
        ) { client, store in
            _ = try await client.write(.post, "/api/widgets", #"[{"id":"a","n":1},{"id":"b","n":9}]"#)
            let query = "filter=%7B%22n%22%3A%7B%22gte%22%3A5%7D%7D"
            let tag = try #require(try await client.get("/api/widgets?\(query)").headers[.eTag])
            let outside = Self.commit(store, "widgets", #"{"id":"c","n":1}"#, after: .milliseconds(200))
            let inside = Self.commit(store, "widgets", #"{"id":"d","n":7}"#, after: .milliseconds(900))
            var headers: HTTPFields = [.ifNoneMatch: tag]
            headers[HTTPField.Name("Delta-Client")!] = "c1"
            let started = ContinuousClock.now
            let woken = try await client.get("/api/widgets?\(query)&wait=\(liveWait)", headers)
            let answered = ContinuousClock.now
            _ = try await outside.value
            let committed = try await inside.value
            #expect(woken.status == .ok, "\(woken.status)")
            #expect(String(buffer: woken.body) == #"{"widgets":[{"id":"d","n":7}]}"#)
            #expect(woken.headers[HTTPField.Name("Delta-Last-Mutation")!] == "0")
            #expect(answered - started >= .milliseconds(900), "the commit outside the selection woke it (\(answered - started))")
            #expect(answered - started < .seconds(liveWait), "the wait ran out instead of waking")
            #expect(answered - committed < wakeBound, "answered \(answered - committed) after the commit inside returned")
            // A client that follows cacheable reads: the wait ends in the 307 to the change.
            let current = try #require(woken.headers[.eTag])
            let later = Self.commit(store, "widgets", #"{"id":"e","n":8}"#, after: .milliseconds(300))
            var following: HTTPFields = [.ifNoneMatch: current]
            following[HTTPField.Name("Delta-Redirect")!] = "1"
            let moved = try await client.get("/api/widgets?\(query)&wait=\(liveWait)", following)
            _ = try await later.value
            #expect(moved.status == .temporaryRedirect)
            #expect(moved.headers[.location]?.hasPrefix("widgets?\(query)&since=") == true, "\(moved.headers[.location] ?? "none")")
        }
    }

    @Test(
        "A wait the router holds is answered as the router answers at that moment: a token that expires while it waits gets 401, never rows committed after it expired, nor a 304 at its deadline",
        arguments: Backend.available)
    func tokenExpiresWhileWaiting(backend: Backend) async throws {
        try await withUserServer(backend: backend, rules: exampleRules) { client, store in
            _ = try await client.write(.post, "/api/notes", #"[{"id":"n1","owner":"ada"}]"#)
            let ada = try await Mint.hs256("ada")
            for commits in [true, false] {
                let tag = try #require(try await client.get("/api/notes", as: ada).header("ETag"))
                // Four seconds left in the leeway. Never verified before its wait, the token is
                // held by the router (the raw path holds only tokens it has seen verified).
                let expiring = try await Mint.hs256("ada", ttl: -Int64(Authenticator.leeway) + 4)
                let commit = commits ? Self.commit(store, "notes", #"{"id":"n2","owner":"ada","note":"after expiry"}"#, after: .seconds(6)) : nil
                let answer = try await client.get("/api/notes?wait=8", as: expiring, [.ifNoneMatch: tag])
                _ = try await commit?.value
                #expect(answer.status == .unauthorized, "commit \(commits): \(answer.status) \(answer.text)")
                #expect(answer.text.contains("token-expired"), "commit \(commits): \(answer.text)")
                #expect(!answer.text.contains("after expiry"))
            }
        }
    }
}

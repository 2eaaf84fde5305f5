import DeltaCore
import DeltaRules
import DeltaStore
import DeltaTestSupport
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Logging
import NIOConcurrencyHelpers
import NIOCore
import Testing

@testable import DeltaServer

@Suite("Public answers: a public collection's plain reads from the same token are computed once")
struct PublicAnswerTests {
    /// The fields but those that say how the bytes were framed or when they were sent, as sorted lines.
    static func lines(_ headers: HTTPFields) -> [String] {
        headers.filter { ![.date, .contentLength, .transferEncoding].contains($0.name) }.map { "\($0.name.canonicalName): \($0.value)" }.sorted()
    }

    @Test(
        "The same token's delta, and the full dataset, are sent again from memory byte for byte with the same fields, gzip-encoded or not; a commit makes the next answer new",
        arguments: Backend.available)
    func sentAgainFromMemory(backend: Backend) async throws {
        try await withServer(.loopback, backend: backend) { client, _ in
            // Enough records that a delta of three stays a delta (not the smaller full dataset).
            _ = try await client.write(
                .post, "/api/w", #"[{"id":"a","v":1},{"id":"b","v":1},{"id":"c","v":1},{"id":"d","v":1},{"id":"e","v":1},{"id":"f","v":1}]"#)
            // That full read is computed (and kept at its token).
            let old = try #require(try await client.get("/api/w").headers[.eTag])
            _ = try await client.write(.put, "/api/w/a", #"{"id":"a","v":2}"#)
            _ = try await client.write(.delete, "/api/w/b", "")
            for encoding: HTTPFields in [[:], [.acceptEncoding: "gzip"]] {
                var asked = encoding
                asked[.ifNoneMatch] = old
                let computed = try await client.get("/api/w", asked)
                let kept = try await client.get("/api/w", asked)
                #expect(computed.status == .ok && kept.status == .ok)
                #expect(Array(buffer: kept.body) == Array(buffer: computed.body), "\(encoding)")
                #expect(Self.lines(kept.headers) == Self.lines(computed.headers), "\(encoding)")
                #expect(kept.headers[.cacheControl] == "no-store" && kept.headers[.vary] == ReadRoute.vary)
                #expect(kept.headers[HTTPField.Name("Delta-Base")!] == old)
            }
            let delta = try await client.get("/api/w", [.ifNoneMatch: old])
            #expect(String(buffer: delta.body) == #"{"w":[{"id":"a","v":2},{"hidden":true,"id":"b","v":1}]}"#)
            #expect(try await client.metric(#"deltasnap_public_answers_total{source="database"}"#) == 3)
            #expect(try await client.metric(#"deltasnap_public_answers_total{source="memory"}"#) == 3)

            let full = try await client.get("/api/w")
            let fullAgain = try await client.get("/api/w")
            #expect(full.headers[HTTPField.Name("Delta-Mode")!] == "full")
            #expect(Array(buffer: fullAgain.body) == Array(buffer: full.body) && Self.lines(fullAgain.headers) == Self.lines(full.headers))
            #expect(try await client.metric(#"deltasnap_public_answers_total{source="memory"}"#) == 4)

            // A commit: the old token's answer now ends at the new head, computed again.
            _ = try await client.write(.put, "/api/w/c", #"{"id":"c","v":3}"#)
            let newer = try await client.get("/api/w", [.ifNoneMatch: old])
            #expect(newer.headers[.eTag] != delta.headers[.eTag])
            #expect(String(buffer: newer.body) == #"{"w":[{"id":"a","v":2},{"hidden":true,"id":"b","v":1},{"id":"c","v":3}]}"#)
            #expect(try await client.metric(#"deltasnap_public_answers_total{source="database"}"#) == 5, "the full read, and this one")
            let newerAgain = try await client.get("/api/w", [.ifNoneMatch: old])
            #expect(Array(buffer: newerAgain.body) == Array(buffer: newer.body) && newerAgain.headers[.eTag] == newer.headers[.eTag])
            #expect(try await client.metric(#"deltasnap_public_answers_total{source="memory"}"#) == 5)
        }
    }

    @Test(
        "A kept answer that the read switched to the full dataset (more changes than records) says so again: the same mode, fields and bytes",
        arguments: Backend.available)
    func keptFullStaysFull(backend: Backend) async throws {
        try await withServer(.loopback, backend: backend) { client, _ in
            _ = try await client.write(.post, "/api/w", #"[{"id":"a","v":1},{"id":"b","v":1},{"id":"c","v":1}]"#)
            let old = try #require(try await client.get("/api/w").headers[.eTag])
            _ = try await client.write(.put, "/api/w/a", #"{"id":"a","v":2}"#)
            _ = try await client.write(.delete, "/api/w/b", "")
            _ = try await client.write(.put, "/api/w/c", #"{"id":"c","v":3}"#)
            let computed = try await client.get("/api/w", [.ifNoneMatch: old])
            let kept = try await client.get("/api/w", [.ifNoneMatch: old])
            #expect(computed.headers[HTTPField.Name("Delta-Mode")!] == "full", "three changes, two records: the full dataset")
            #expect(String(buffer: computed.body) == #"{"w":[{"id":"a","v":2},{"id":"c","v":3}]}"#)
            #expect(Array(buffer: kept.body) == Array(buffer: computed.body))
            #expect(Self.lines(kept.headers) == Self.lines(computed.headers))
            #expect(try await client.metric(#"deltasnap_public_answers_total{source="memory"}"#) == 1)
        }
    }

    @Test("With no memory (--answer-cache-mb 0) every answer is computed, the same bytes", arguments: Backend.available)
    func noMemory(backend: Backend) async throws {
        try await withServer(.loopback, backend: backend, configure: { $0.answerCacheBytes = 0 }) { client, _ in
            _ = try await client.write(.post, "/api/w", #"[{"id":"a","v":1},{"id":"b","v":1}]"#)
            let old = try #require(try await client.get("/api/w").headers[.eTag])
            _ = try await client.write(.put, "/api/w/a", #"{"id":"a","v":2}"#)
            let first = try await client.get("/api/w", [.ifNoneMatch: old])
            let second = try await client.get("/api/w", [.ifNoneMatch: old])
            #expect(String(buffer: first.body) == #"{"w":[{"id":"a","v":2}]}"# && String(buffer: second.body) == String(buffer: first.body))
            #expect(try await client.metric(#"deltasnap_public_answers_total{source="memory"}"#) == 0)
        }
    }

    @Test(
        "Under rules, only a public collection's answers are kept: an owner's and a user's reads of a restricted one are read each time",
        arguments: Backend.available)
    func restrictedNeverKept(backend: Backend) async throws {
        try await withUserServer(backend: backend, rules: exampleRules) { client, _ in
            _ = try await client.write(.post, "/api/notes", #"[{"id":"n1","owner":"ada"},{"id":"n2","owner":"bob"}]"#)
            _ = try await client.write(.post, "/api/airports", #"[{"id":"p1","name":"Paris"}]"#)
            let owner = "Bearer \(secret)"
            let old = try #require(try await client.get("/api/notes", [.authorization: owner]).headers[.eTag])
            _ = try await client.write(.put, "/api/notes/n1", #"{"id":"n1","owner":"ada","v":2}"#)
            for _ in 0..<2 {
                let read = try await client.get("/api/notes", [.authorization: owner, .ifNoneMatch: old])
                #expect(read.status == .ok && read.headers[.cacheControl] == "private, no-store")
                #expect(String(buffer: read.body) == #"{"notes":[{"id":"n1","owner":"ada","v":2}]}"#)
                let ada = try await client.get("/api/notes", as: try await Mint.hs256("ada"))
                #expect(ada.status == .ok && String(buffer: ada.body).contains("n1") && !String(buffer: ada.body).contains("n2"))
            }
            #expect(try await client.metric(#"deltasnap_public_answers_total{source="database"}"#) == 0)
            #expect(try await client.metric(#"deltasnap_public_answers_total{source="memory"}"#) == 0)
            // The public collection's are.
            for _ in 0..<2 { #expect(try await client.get("/api/airports", as: nil).status == .ok) }
            #expect(try await client.metric(#"deltasnap_public_answers_total{source="memory"}"#) == 1)
        }
    }

    @Test(
        "Rules that make a public collection restricted: its kept answers, under the plain read's key and the cacheable read's, are sent to nobody",
        arguments: Backend.available)
    func rulesChangeForgets(backend: Backend) async throws {
        let held = NIOLockedValueBox<LiveRules?>(nil)
        try await withUserServer(
            backend: backend, rules: exampleRules,
            configure: { configuration in
                let live = configuration.rules.map(LiveRules.init)
                configuration.liveRules = live
                held.withLockedValue { $0 = live }
            }
        ) { client, store in
            let live = try #require(held.withLockedValue { $0 })
            _ = try await client.write(.post, "/api/airports", #"[{"id":"p1","name":"Paris"},{"id":"p2","name":"Oslo"}]"#)
            let old = try #require(try await client.get("/api/airports", as: nil).headers[.eTag])
            _ = try await client.write(.put, "/api/airports/p1", #"{"id":"p1","name":"Paris-CDG"}"#)
            let computed = try await client.get("/api/airports", as: nil, [.ifNoneMatch: old])
            let head = try #require(computed.headers[.eTag])
            #expect(try await client.get("/api/airports", as: nil, [.ifNoneMatch: old]).status == .ok)
            #expect(try await client.metric(#"deltasnap_public_answers_total{source="memory"}"#) == 1)
            // Kept under the cacheable read's key too: that URL, asked by anyone, gets the same bytes from the raw path.
            let until = "/api/airports?since=\(String(old.dropFirst(3).dropLast()))&until=\(String(head.dropFirst(3).dropLast()))"
            let early = try await client.get(until)
            #expect(early.status == .ok && Array(buffer: early.body) == Array(buffer: computed.body))
            #expect(early.headers[.cacheControl] == CacheableRead.immutable)
            #expect(try await client.metric(#"deltasnap_cacheable_answers_total{source="memory"}"#) == 1)

            // Version 2: airports are the owner's alone.
            _ = try await store.installRules(try Rules(parsing: Array(exampleRules.replacingOccurrences(of: "airports", with: "ports").utf8)))
            #expect(try await live.refresh(from: store).version == 2)
            let anonymous = try await client.get("/api/airports", as: nil, [.ifNoneMatch: old])
            #expect(anonymous.status == .unauthorized, "\(anonymous.status): \(String(buffer: anonymous.body))")
            let cacheable = try await client.get(until)
            #expect(cacheable.status == .unauthorized || cacheable.status == .forbidden, "\(cacheable.status): \(String(buffer: cacheable.body))")
            #expect(!String(buffer: cacheable.body).contains("Paris"))
            #expect(try await client.metric(#"deltasnap_cacheable_answers_total{source="memory"}"#) == 1)
        }
    }
}

extension PublicAnswerTests {
    /// A router sharing `answers` with the test, in-process.
    static func withRouter(
        backend: Backend, bytes: Int, _ body: @escaping @Sendable (any TestClientProtocol, AnswerCache) async throws -> Void
    ) async throws {
        var configuration = ServerConfiguration()
        configuration.writeToken = secret
        configuration.answerCacheBytes = bytes
        let settings = configuration
        try await backend.withStore { store, _ in
            let answers = AnswerCache(maximumBytes: bytes)
            let metrics = ServerMetrics()
            let responder = LateResponder()
            let router = makeRouter(
                store: store, configuration: settings, metrics: metrics, answers: answers,
                longPoll: LongPoll(store: store, maximumWaiting: 10, metrics: metrics), responder: responder, logger: Logger(label: "t"))
            responder.responder = router.buildResponder()
            let app = Application(router: router)
            try await app.test(.router) { client in try await body(client, answers) }
        }
    }

    @Test("An answer too large to keep forgets its start: later reads from it are read at once, not asked where they end first", arguments: Backend.available)
    func tooLargeKeepsAskingFirst(backend: Backend) async throws {
        // Entries at most 100 bytes.
        try await Self.withRouter(backend: backend, bytes: 800) { client, answers in
            _ = try await client.write(.post, "/api/w", #"[{"id":"a"}]"#)
            #expect(try await client.get("/api/w").status == .ok)
            let start = AnswerCache.startKey(collection: try CollectionName("w"), since: nil, gzip: false)
            #expect(answers.keepsAnswers(from: start), "the small full dataset is kept")
            // The dataset grows past what an entry may hold: its answers are computed and never kept ...
            let big = String(repeating: "x", count: 200)
            _ = try await client.write(.put, "/api/w/b", #"{"id":"b","pad":"\#(big)"}"#)
            #expect(try await client.get("/api/w").status == .ok)
            #expect(try await client.get("/api/w").status == .ok)
            // ... so the start no longer says an answer is kept: otherwise every full read would ask
            // the verdict (a transaction) before its read, for as long as the old entry stayed.
            #expect(!answers.keepsAnswers(from: start), "an answer from this start that was not kept forgets the start")
        }
    }

    @Test("A kept answer carries each writing client's own Delta-Last-Mutation, read with the verdict", arguments: Backend.available)
    func lastMutationPerClient(backend: Backend) async throws {
        try await withPushServer(backend: backend) { client, _ in
            _ = try await client.push(pushBody(#"{"id":1,"collection":"notes","op":"put","record":{"id":"a"},"base":null}"#))
            let pushed = try await client.push(
                pushBody(
                    #"{"id":1,"collection":"notes","op":"put","record":{"id":"b"},"base":null}"#,
                    #"{"id":2,"collection":"notes","op":"put","record":{"id":"c"},"base":null}"#, client: "c2"))
            #expect(pushed.status == .ok, "\(pushed.text)")
            let computed = try await client.get("/api/notes")
            #expect(computed.headers[HTTPField.Name("Delta-Last-Mutation")!] == nil)
            let c1 = try await client.get("/api/notes", [HTTPField.Name("Delta-Client")!: "c1"])
            let c2 = try await client.get("/api/notes", [HTTPField.Name("Delta-Client")!: "c2"])
            #expect(c1.headers[HTTPField.Name("Delta-Last-Mutation")!] == "1")
            #expect(c2.headers[HTTPField.Name("Delta-Last-Mutation")!] == "2")
            #expect(Array(buffer: c1.body) == Array(buffer: computed.body))
            #expect(try await client.metric(#"deltasnap_public_answers_total{source="memory"}"#) == 2)
        }
    }
}

@Suite("AnswerCache: answers are kept and sent under the rules they were computed under")
struct AnswerCacheRulesTests {
    @Test("An answer kept under rules no longer held is not sent, and one computed under them is not kept", arguments: Backend.available)
    func oldRulesNeitherSentNorKept(backend: Backend) async throws {
        try await backend.withStore { store, _ in
            let first = try Rules(parsing: Array(exampleRules.utf8))
            let live = LiveRules(StoredRules(version: try await store.installRules(first), rules: first))
            let answers = AnswerCache(maximumBytes: 1 << 20, rules: live)
            let entry = AnswerCache.Entry(headers: [:], body: ByteBuffer(string: "answer"))
            answers.keep("a", entry, rules: 1, start: "s")
            #expect(answers.entry("a")?.body == ByteBuffer(string: "answer") && answers.keepsAnswers(from: "s"))
            answers.keep("b", entry, rules: 7)
            #expect(answers.entry("b") == nil, "computed under a version never held")
            // The rules change; `removeAll` has not run yet (it runs after the change).
            _ = try await store.installRules(try Rules(parsing: Array(exampleRules.replacingOccurrences(of: "airports", with: "ports").utf8)))
            #expect(try await live.refresh(from: store).version == 2)
            #expect(answers.entry("a") == nil, "kept under version 1")
            answers.keep("c", entry, rules: 1)
            #expect(answers.entry("c") == nil && answers.usage.entries == 1, "computed under version 1, finished after the change")
            answers.keep("d", entry, rules: 2)
            #expect(answers.entry("d") != nil)
        }
    }

    @Test("Evicting a plain read's newest answer forgets its start: the next read asks nothing first")
    func evictionForgetsStart() {
        let answers = AnswerCache(maximumBytes: 10, maximumEntryBytes: 10)
        answers.keep("a", AnswerCache.Entry(headers: [:], body: ByteBuffer(string: "123456")), rules: nil, start: "s")
        #expect(answers.keepsAnswers(from: "s"))
        answers.keep("b", AnswerCache.Entry(headers: [:], body: ByteBuffer(string: "789012")), rules: nil, start: "t")
        #expect(answers.entry("a") == nil && !answers.keepsAnswers(from: "s"))
        #expect(answers.keepsAnswers(from: "t"))
    }
}

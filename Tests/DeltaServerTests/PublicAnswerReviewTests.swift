import DeltaCore
import DeltaStore
import DeltaTestSupport
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Logging
import NIOCore
import Testing

@testable import DeltaServer

@Suite("Review of public answers")
struct PublicAnswerReviewTests {
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

    @Test("A start whose newest answer no longer fits keeps asking the verdict first on every read", arguments: Backend.available)
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
            // ... yet the start still says an answer is kept: every full read asks the verdict (a
            // transaction) before its read, for as long as the old entry stays in memory.
            #expect(!answers.keepsAnswers(from: start), "an answer from this start that was not kept should forget the start")
        }
    }

    @Test("A kept answer carries each writing client's own Delta-Last-Mutation", arguments: Backend.available)
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

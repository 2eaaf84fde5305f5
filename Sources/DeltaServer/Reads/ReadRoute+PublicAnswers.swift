import DeltaCore
import DeltaStore
import HTTPTypes
import Hummingbird
import NIOCore

/// Public answers: a plain read of a public collection's whole dataset, from a token or from
/// nothing, is the same bytes for every client that sends that token, up to the commit it is
/// answered at. Every app ships the same bundled token and clients converge on the newest one,
/// so many clients ask the same question; the answer is computed once and sent again from
/// memory (`AnswerCache`, under the same key as the cacheable read of the same ends).
///
/// A start with an answer kept is asked where its read would end first, without records
/// (`ChangeReader.verdict`); the kept answer is sent when it ends there. A start with none is
/// read at once, as before, and its answer kept: a client alone at its token pays no extra
/// question.
extension ReadRoute {
    /// Where a plain read starts when its answer can be kept: the start key (`AnswerCache.startKey`),
    /// or nil when it cannot (a date names no exact start; the memory is off).
    func publicStart(_ collection: CollectionName, since: Since, gzip: Bool) -> String? {
        guard answers.maximumBytes > 0 else { return nil }
        switch since {
        case .nothing: return AnswerCache.startKey(collection: collection, since: nil, gzip: gzip)
        case .token(let token): return AnswerCache.startKey(collection: collection, since: token, gzip: gzip)
        case .position: return nil
        }
    }

    /// The key of the answer from `since` at `until`: the cacheable read's of the same ends.
    func publicKey(_ collection: CollectionName, since: Since, until: Token, gzip: Bool) -> String {
        var start: Token?
        if case .token(let token) = since { start = token }
        let read = CacheableRead(since: start, until: until, filter: nil, limit: nil)
        return AnswerCache.key(target: "\(collection.rawValue)?\(read.query)", gzip: gzip)
    }

    /// The answer of a `GET` from `start` without its records, when one is kept and ends where
    /// the read would end now: a `304` or a rejection, or the kept body (`kept`) with a feed of no
    /// records that names its token, digest and mode. Nil when the records must be read.
    func keptAnswer(
        _ collection: CollectionName, since: Since, client: String?, start: String, gzip: Bool
    ) async throws -> (read: (ReadResult, UInt64?), kept: AnswerCache.Entry?)? {
        guard answers.keepsAnswers(from: start) else { return nil }
        let (verdict, last) = try await store.verdict(collection, since: since, client: client)
        switch verdict {
        case .answer(let result):
            return ((result, last), nil)
        case .stream(let token, let mode, let digest):
            guard let kept = answers.entry(publicKey(collection, since: since, until: token, gzip: gzip)) else { return nil }
            // The verdict does not count the changed records, so it cannot tell that the read
            // answered the full dataset instead of a longer delta: the kept answer says which.
            let answered: FeedMode = kept.headers[Self.deltaMode] == "full" ? .full : mode
            metrics.publicAnswers(computed: false)
            return ((.changes(EmptyFeed(token: token, digest: digest, mode: answered)), last), kept)
        }
    }

    /// A public answer's `200` body: `kept`'s bytes; or `feed` streamed, recorded and kept from
    /// `start` once all of it was sent (when it fits).
    func publicBody(
        _ feed: any ChangeFeed, kept: AnswerCache.Entry?, collection: CollectionName, since: Since, start: String, gzip: Bool
    ) -> ResponseBody {
        if let kept {
            feed.close()
            return ResponseBody(byteBuffer: kept.body)
        }
        metrics.publicAnswers(computed: true)
        let recorder = AnswerRecorder(limit: answers.maximumEntryBytes)
        let key = publicKey(collection, since: since, until: feed.token.unmarked, gzip: gzip)
        // Kept with the cacheable read's fields: that read, of the same ends, is sent this entry too,
        // before the HTTP decoder (`NotModifiedBeforeDecoding+KeptAnswers`).
        var sent: String?
        if case .token(let token) = since { sent = token.entityTag }
        var fields = answerHeaders(feed, sent: sent, grant: nil)
        if gzip { fields[.contentEncoding] = "gzip" }
        let answers = self.answers
        let rules = configuration.rules?.version
        return body(feed, collection: collection, gzip: gzip, recorder: recorder) { [fields] in
            // Too large to keep: the start's older answers can never be sent again from it.
            guard let bytes = recorder.recorded else { return answers.forget(start: start) }
            answers.keep(key, AnswerCache.Entry(headers: fields, body: ByteBuffer(bytes: bytes)), rules: rules, start: start)
        }
    }
}

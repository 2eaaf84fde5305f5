import DeltaCore
import DeltaStore
import HTTPTypes
import NIOCore
import Prometheus

/// Answers `304 Not Modified` from the raw bytes of a connection, before the HTTP/1 decoder.
///
/// A connection that only revalidates (an app launch with nothing new, a poller) is answered
/// here without NIO's decoder and encoder or the HTTPTypes conversion, which cost more than the
/// answer (docs/decisions/2026-11-21-early-answers-before-the-decoder.md). It handles only the
/// plainest request: a whole header block `GET /api/{collection} HTTP/1.1` with CRLF line ends,
/// a validator the store says is current, no body headers, no `Connection: close`. Such a
/// request it cannot answer (a delta, a first download) goes to the decoder alone, and the bytes after it wait here until its response has
/// ended (`ResponseEnds`): then the connection is read here again, so a client that polls on one
/// connection after a delta still gets its `304`s here (`+Routing`). At the first request that
/// is anything else, it hands every byte from that request on to the decoder and stays out of the
/// way for the rest of the connection. Either way responses never overtake one another. A
/// cacheable read the router already answered and kept (`AnswerCache`) is sent from here too,
/// byte for byte as the router sends it.
///
/// The verdicts come from the store's `EarlyVerdicts`, when it has them. One that takes a
/// database round trip (`.ask`: PostgreSQL) is asked asynchronously
/// (`NotModifiedBeforeDecoding+RoundTrip.swift`); bytes that come meanwhile wait, and once any
/// have the connection reads nothing more until the answer is in, so responses stay in order
/// there too.
///
/// Which of these holds at any moment is `RawPathStateMachine`'s one state; this handler tells it
/// the connection's events and carries out the actions it returns.
final class NotModifiedBeforeDecoding: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    /// The longest header block waited for; longer ones go to the decoder, which enforces its own limits.
    static let maximumHeaderBytes = 8 << 10

    let verdicts: (any EarlyVerdicts)?
    /// Users' early `304`s, on a server with rules.
    let users: UserVerdicts?
    let metrics: ServerMetrics
    /// Who reads the connection's bytes now, and where the unread ones wait: the only state of
    /// the connection (`RawPathStateMachine`); what follows are memories of earlier answers.
    var machine = RawPathStateMachine(maximumHeaderBytes: maximumHeaderBytes)
    /// The last request a round trip found changed: sent again, it goes to the router unasked
    /// (`+RoundTrip`).
    var changed: RawRequest?
    private var dateSecond: UInt64 = 0
    private var date = ByteBuffer()
    private var lastQuestion: (request: RawRequest, question: (CollectionName, Since))?
    private var lastAdmission: (request: RawRequest, admission: UserVerdicts.Admission)?
    private var lastHead: (token: Token, digest: StateDigest, bytes: ByteBuffer)?

    /// Cacheable answers the router kept, sent from here when asked for again (`+KeptAnswers`).
    let answers: AnswerCache
    /// Where live clients' requests wait (`+Waiting`), and the longest wait (`maximumWait`); nil: they go to the router.
    let longPoll: LongPoll?
    let maximumWait: Int
    /// This connection's request waiting in `longPoll.room`, while it waits.
    var parked: Int? {
        didSet { idleness?.rawWaiting = parked != nil }
    }
    /// The connection's idle timeout, told of what the raw path takes and holds (`ConnectionIdleness`).
    let idleness: ConnectionIdleness?
    /// The client ended its input while its request waited or was asked about by round trip: the
    /// event is passed on after the answer (`endInputAfterAnswer`).
    var inputEndedWhileAsking = false
    /// The `deltasnap_http_requests` counter of this connection's last early `304`, by its method.
    private var notModifiedCounter: (method: String, counter: Counter)?
    /// Succeeded when the decoder first gets bytes or the connection ends: Hummingbird's side of
    /// the connection starts then (`DeltaHTTP1Channel.handle`).
    private var decoderNeeded: EventLoopPromise<Void>?

    init(
        verdicts: (any EarlyVerdicts)?, users: UserVerdicts? = nil, metrics: ServerMetrics, answers: AnswerCache, longPoll: LongPoll? = nil,
        maximumWait: Int = 0, decoderNeeded: EventLoopPromise<Void>? = nil, idleness: ConnectionIdleness? = nil
    ) {
        self.verdicts = verdicts
        self.users = users
        self.metrics = metrics
        self.answers = answers
        self.longPoll = longPoll
        self.maximumWait = maximumWait
        self.decoderNeeded = decoderNeeded
        self.idleness = idleness
    }

    /// Hands `buffer` to the decoder (the first time, Hummingbird's side of the connection starts).
    func toDecoder(_ context: ChannelHandlerContext, _ buffer: ByteBuffer) {
        decoderStarts()
        context.fireChannelRead(wrapInboundOut(buffer))
    }

    /// Hummingbird's side of the connection starts, if it has not: the decoder is about to get
    /// bytes or an event, or the connection ends.
    func decoderStarts() {
        guard let promise = decoderNeeded else { return }
        decoderNeeded = nil
        promise.succeed()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if machine.isPassingThrough {
            decoderStarts()
            return context.fireChannelRead(data)
        }
        switch machine.channelRead(unwrapInboundIn(data)) {
        case .process(let buffer): process(context, buffer)
        case .forward(let buffer): toDecoder(context, buffer)
        case .wait: break
        case .handOver(let buffer, let readHeld):
            // A waiting request handed over with the rest is the router's now: it leaves the room.
            leaveRoom()
            // Inside a read: its channelReadComplete follows, as for any read handed over.
            toDecoder(context, buffer)
            if readHeld { context.read() }
        }
    }

    /// Answers the `304`s (and kept answers) at the front of `input`; hands the rest to the
    /// decoder, or keeps an incomplete request, or starts a round trip for one.
    func process(_ context: ChannelHandlerContext, _ input: ByteBuffer) {
        var buffer = input
        var answered = false
        while true {
            switch machine.next(buffer) {
            case .needMore:
                if answered { context.flush() }
                return
            case .forward(let rest):
                if answered { context.flush() }
                return toDecoder(context, rest)
            case .request(let request, let length):
                idleness?.touch()
                guard context.channel.isWritable else {
                    if answered { context.flush() }
                    return toDecoder(context, machine.handOver(buffer))
                }
                if sendKept(context, request) {
                    buffer.moveReaderIndex(forwardBy: length)
                    answered = true
                    continue
                }
                // A request a round trip found changed is not asked again (`+RoundTrip`).
                switch request == changed ? .unknown : earlyVerdict(request) {
                case .notModified(let token, let digest):
                    // A live client's request waits here for a change (`+Waiting`).
                    if waits(request) {
                        if answered { context.flush() }
                        return park(context, buffer, request: request, length: length, readHeld: false)
                    }
                    answer(context, request, token, digest)
                    buffer.moveReaderIndex(forwardBy: length)
                    answered = true
                case .ask(let ask):
                    if answered { context.flush() }
                    return askByRoundTrip(context, buffer, request: request, length: length, ask)
                case .unknown:
                    if answered { context.flush() }
                    return route(context, buffer, length: length)
                }
            }
        }
    }

    /// The early verdict on `request` (`verdict(_:_:_:)`), with this connection's last question and
    /// admission kept; `.unknown` for a cross-origin request that does not wait here (its `304`
    /// carries the router's CORS headers).
    private func earlyVerdict(_ request: RawRequest) -> EarlyVerdict {
        if request.hasOrigin, !waits(request) { return .unknown }
        return Self.verdict(users.flatMap { admission(request, $0) }, users, verdicts.flatMap { verdicts in question(request).map { (verdicts, $0) } })
    }

    /// The early verdict on a request: a user's (`UserVerdicts`) when it is one they may be
    /// answered early (`admission`), else the store's public one on its `question`; `.unknown`
    /// sends it to the decoder.
    static func verdict(
        _ admission: UserVerdicts.Admission?, _ users: UserVerdicts?, _ question: (any EarlyVerdicts, (CollectionName, Since))?
    ) -> EarlyVerdict {
        if let users, let admission {
            let verdict = users.verdict(admission)
            if case .unknown = verdict {} else { return verdict }
        }
        guard let (verdicts, (collection, since)) = question else { return .unknown }
        return verdicts.earlyVerdict(collection, since: since)
    }

    /// The early verdict on `request`, without a connection's memory: the `WaitingRoom`'s, asked again at each look.
    static func verdict(_ request: RawRequest, verdicts: (any EarlyVerdicts)?, users: UserVerdicts?) -> EarlyVerdict {
        let admission = users.flatMap {
            $0.admit(collection: String(request.name), ifNoneMatch: request.ifNoneMatch, authorization: request.authorization)
        }
        return verdict(admission, users, verdicts.flatMap { verdicts in question(request).map { (verdicts, $0) } })
    }

    /// Writes one `304` to `request` (not flushed) and counts it.
    func answer(_ context: ChannelHandlerContext, _ request: RawRequest, _ token: Token, _ digest: StateDigest) {
        context.write(wrapOutboundOut(response(token, digest, allocator: context.channel.allocator)), promise: nil)
        if notModifiedCounter?.method != request.method {
            notModifiedCounter = (request.method, metrics.requestCounter(route: "/api/{collection}", method: request.method, status: 304))
        }
        metrics.request(counter: notModifiedCounter!.counter, status: 304)
        metrics.earlyNotModified.increment()
    }

    /// A user's request, checked (`UserVerdicts.admit`); the last one is kept, like `question`.
    private func admission(_ request: RawRequest, _ users: UserVerdicts) -> UserVerdicts.Admission? {
        if let last = lastAdmission, last.request == request { return last.admission }
        guard let admission = users.admit(collection: String(request.name), ifNoneMatch: request.ifNoneMatch, authorization: request.authorization)
        else { return nil }
        lastAdmission = (request, admission)
        return admission
    }

    /// What `request` asks; a connection usually repeats the same request, so the last answer is kept.
    private func question(_ request: RawRequest) -> (CollectionName, Since)? {
        if let last = lastQuestion, last.request == request { return last.question }
        guard let question = Self.question(request) else { return nil }
        lastQuestion = (request, question)
        return question
    }

    /// What `request` asks: its collection, and since what its validators say.
    static func question(_ request: RawRequest) -> (CollectionName, Since)? {
        Conditional.notModifiedQuestion(collection: request.name, ifNoneMatch: request.ifNoneMatch, ifModifiedSince: request.ifModifiedSince)
    }

    /// The router's `304` as bytes: its fields (`ReadRoute.notModifiedFields`, serialised once
    /// per token) and the current `Date`.
    private func response(_ token: Token, _ digest: StateDigest, allocator: ByteBufferAllocator) -> ByteBuffer {
        if lastHead?.token != token || lastHead?.digest != digest {
            lastHead = (token, digest, ByteBuffer(string: "HTTP/1.1 304 Not Modified\r\n" + ReadRoute.notModifiedFields(token, digest).http1Lines))
        }
        var out = allocator.buffer(capacity: 320)
        out.writeImmutableBuffer(lastHead!.bytes)
        out.writeImmutableBuffer(dateLine())
        return out
    }

    /// `Date: <now>` and the blank line that ends a header block, formatted once a second.
    func dateLine() -> ByteBuffer {
        let now = HTTPDate.currentSeconds
        if now != dateSecond || date.readableBytes == 0 {
            dateSecond = now
            date = ByteBuffer(string: "Date: \(HTTPDate.format(now))\r\n\r\n")
        }
        return date
    }
}

extension HTTPFields {
    /// The fields as HTTP/1.1 header lines, each ending in CRLF, in order: what the answers sent
    /// from the raw bytes write where the encoder would.
    var http1Lines: String {
        var text = ""
        for field in self { text += "\(field.name.rawName): \(field.value)\r\n" }
        return text
    }
}

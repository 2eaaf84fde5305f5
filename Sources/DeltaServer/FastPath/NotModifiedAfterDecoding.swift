import DeltaCore
import DeltaStore
import HTTPTypes
import NIOCore
import NIOHTTPTypes
import Prometheus

/// Answers `304 Not Modified` on the event loop, after HTTP decoding but before the router.
///
/// A conditional `GET /api/{collection}` whose token is still current is the most frequent
/// request a delta server gets (every app launch with nothing new). Measured, the router's
/// per-request machinery cost more than the answer itself (on such connections this handler
/// answers 1.43 times as many `304`s a second as the router alone, measured again after the raw
/// path became a state machine: docs/decisions/2026-11-28-raw-path-state-machine.md), so
/// it answers those directly when the store can say "not modified" without waiting
/// (`EarlyVerdict.notModified`; one that needs a round trip goes to the router). Connections
/// that only revalidate are answered earlier still, by `NotModifiedBeforeDecoding`; this one
/// serves the connections that handed over to the decoder (a write, a full read, a header the raw
/// reader does not take). Everything else (and every case it is unsure about) goes to the router
/// unchanged. Responses stay in request order: it answers only when no earlier request on the
/// connection is still being answered.
final class NotModifiedAfterDecoding: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    private let verdicts: any EarlyVerdicts
    private let metrics: ServerMetrics
    private var inFlight = 0
    private var skippingAnsweredRequest = false
    /// The fields of the last `304` answered here, by token and digest: a connection repeats one request.
    private var lastFields: (token: Token, digest: StateDigest, fields: HTTPFields)?
    /// The `deltasnap_http_requests` counter of the `304`s answered here, made at the first.
    private var counter: Counter?
    /// The last request's path and validators, and what it asked.
    private var lastQuestion: (path: String, validators: Validators, question: (CollectionName, Since))?
    /// The last `Date` value written, and its second.
    private var lastDate: (seconds: UInt64, text: String)?

    init(verdicts: any EarlyVerdicts, metrics: ServerMetrics) {
        self.verdicts = verdicts
        self.metrics = metrics
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let request):
            if inFlight == 0, let response = answer(request) {
                skippingAnsweredRequest = true
                context.write(wrapOutboundOut(.head(response)), promise: nil)
                context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
                if counter == nil { counter = metrics.requestCounter(route: "/api/{collection}", method: "GET", status: 304) }
                metrics.request(counter: counter!, status: 304)
                return
            }
            inFlight += 1
            context.fireChannelRead(data)
        case .body:
            if !skippingAnsweredRequest { context.fireChannelRead(data) }
        case .end:
            if skippingAnsweredRequest {
                skippingAnsweredRequest = false
            } else {
                context.fireChannelRead(data)
            }
        }
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if case .end = unwrapOutboundIn(data) { inFlight -= 1 }
        context.write(data, promise: promise)
    }

    /// The 304 for `request`, or nil when the router must answer it.
    private func answer(_ request: HTTPRequest) -> HTTPResponse? {
        guard request.method == .get, let path = request.path, path.hasPrefix("/api/"),
            let validators = Self.validators(request.headerFields),
            let (collection, since) = question(path, validators),
            case .notModified(let token, let digest) = verdicts.earlyVerdict(collection, since: since)
        else { return nil }
        if lastFields?.token != token || lastFields?.digest != digest {
            lastFields = (token, digest, ReadRoute.notModifiedFields(token, digest))
        }
        var headers = lastFields!.fields
        headers[.date] = date()
        return HTTPResponse(status: .notModified, headerFields: headers)
    }

    /// The request's validators (`If-None-Match`, `If-Modified-Since`) from one pass over its
    /// fields; nil when a field sends it to the router: a body (`Content-Length`,
    /// `Transfer-Encoding`), `Delta-Client`, `Origin`, `Connection: close`, or a validator sent
    /// twice (the router reads the two as one value: it refuses a joined `If-None-Match`, and
    /// answers as this would when `If-Modified-Since` comes twice beside one).
    static func validators(_ fields: HTTPFields) -> Validators? {
        var found = Validators()
        for field in fields {
            switch field.name {
            case .contentLength, .transferEncoding, .origin, ReadRoute.deltaClient: return nil
            case .connection where field.value.lowercased() == "close": return nil
            case .ifNoneMatch:
                guard found.ifNoneMatch == nil else { return nil }
                found.ifNoneMatch = field.value
            case .ifModifiedSince:
                guard found.ifModifiedSince == nil else { return nil }
                found.ifModifiedSince = field.value
            default: continue
            }
        }
        return found
    }

    /// What a request asks, from its path and validators; a connection repeats one request, so
    /// the last question is kept.
    private func question(_ path: String, _ validators: Validators) -> (CollectionName, Since)? {
        // Compared byte for byte: `String`'s `==` also equates canonically equivalent text.
        if let last = lastQuestion, last.path.utf8.elementsEqual(path.utf8), last.validators.sameBytes(as: validators) { return last.question }
        guard
            let question = Conditional.notModifiedQuestion(
                collection: path.dropFirst(5), ifNoneMatch: validators.ifNoneMatch, ifModifiedSince: validators.ifModifiedSince)
        else { return nil }
        lastQuestion = (path, validators, question)
        return question
    }

    /// This second's `Date` value, formatted once a second.
    private func date() -> String {
        let seconds = HTTPDate.currentSeconds
        if let last = lastDate, last.seconds == seconds { return last.text }
        let text = HTTPDate.format(seconds)
        lastDate = (seconds, text)
        return text
    }

    /// A request's validators, as it sent them.
    struct Validators: Equatable {
        var ifNoneMatch: String?
        var ifModifiedSince: String?

        /// Whether both are the same bytes as `other`'s.
        func sameBytes(as other: Validators) -> Bool {
            func same(_ a: String?, _ b: String?) -> Bool {
                switch (a, b) {
                case (nil, nil): return true
                case (let a?, let b?): return a.utf8.elementsEqual(b.utf8)
                default: return false
                }
            }
            return same(ifNoneMatch, other.ifNoneMatch) && same(ifModifiedSince, other.ifModifiedSince)
        }
    }
}

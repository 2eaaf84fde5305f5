import DeltaCore
import HTTPTypes
import NIOCore
import NIOHTTP1
import NIOHTTPTypes

/// Answers a request the HTTP decoder refuses with a problem, not the bare `400` the HTTP layer
/// would send: `431 headers-too-large` when the header block breaks its bounds, `400
/// malformed-request` for anything else that is not HTTP/1.1. The connection closes after it, as
/// it must: the decoder cannot find where the next request would start.
///
/// It sits after the decoder, before the router. The answer waits until every earlier request on
/// the connection has been answered, so answers keep their order.
final class MalformedRequestAnswer: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    private var inFlight = 0
    private var pending: Problem?
    /// Whether the last request's head was read and its end not yet.
    private var bodyOpen = false
    /// Whether the connection closes once the answer in progress is written (its request broke mid-body).
    private var closeAfterAnswer = false

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head:
            inFlight += 1
            bodyOpen = true
        case .end: bodyOpen = false
        case .body: break
        }
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        guard case .end = unwrapOutboundIn(data) else { return context.write(data, promise: promise) }
        inFlight -= 1
        if closeAfterAnswer && inFlight == 0 {
            let channel = context.channel
            context.writeAndFlush(data).whenComplete { result in
                promise?.completeWith(result)
                channel.close(promise: nil)
            }
            return
        }
        context.write(data, promise: promise)
        if inFlight == 0, let pending { send(pending, context: context) }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        guard let error = error as? HTTPParserError, pending == nil else { return context.fireErrorCaught(error) }
        let problem =
            error == .headerOverflow
            ? Problem(
                .requestHeaderFieldsTooLarge, "headers-too-large",
                "request: the request line and headers are over \(Self.headerBytes) bytes or \(Self.headerFields) fields")
            : Problem(.badRequest, "malformed-request", "request: not HTTP/1.1 (\(error))")
        // Its body broke (a bad chunk, say): the request cannot end, and its handler waits for
        // the rest of the body. The error goes on to fail that body (the handler answers `400
        // malformed-request`), and the connection closes after that answer; holding it for an
        // answer of ours would keep it until the idle timeout.
        if bodyOpen {
            closeAfterAnswer = true
            return context.fireErrorCaught(error)
        }
        pending = problem
        // The request that broke the decoder is counted when its head was read, if it ever was.
        if inFlight == 0 { send(problem, context: context) }
    }

    /// The most bytes of request line and headers the decoder accepts, in all and per field.
    static let headerBytes = 64 << 10
    /// The most header fields the decoder accepts.
    static let headerFields = 100

    private func send(_ problem: Problem, context: ChannelHandlerContext) {
        let body = problem.body
        let head = HTTPResponse(
            status: problem.status,
            headerFields: [
                .contentType: "application/problem+json", .cacheControl: "no-store", .connection: "close",
                .contentLength: String(body.count), .date: HTTPDate.now,
            ])
        context.write(wrapOutboundOut(.head(head)), promise: nil)
        context.write(wrapOutboundOut(.body(context.channel.allocator.buffer(bytes: body))), promise: nil)
        let channel = context.channel
        context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in channel.close(promise: nil) }
    }
}

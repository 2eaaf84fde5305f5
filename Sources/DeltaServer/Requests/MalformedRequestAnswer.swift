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

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if case .head = unwrapInboundIn(data) { inFlight += 1 }
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        context.write(data, promise: promise)
        if case .end = unwrapOutboundIn(data) {
            inFlight -= 1
            if inFlight == 0, let pending { send(pending, context: context) }
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        guard let error = error as? HTTPParserError, pending == nil else { return context.fireErrorCaught(error) }
        let problem =
            error == .headerOverflow
            ? Problem(
                .requestHeaderFieldsTooLarge, "headers-too-large",
                "request: the request line and headers are over \(Self.headerBytes) bytes or \(Self.headerFields) fields")
            : Problem(.badRequest, "malformed-request", "request: not HTTP/1.1 (\(error))")
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

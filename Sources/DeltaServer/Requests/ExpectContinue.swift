import HTTPTypes
import NIOCore
import NIOHTTPTypes

/// Answers `Expect: 100-continue` (RFC 9110, section 10.1.1) with `100 Continue` as soon as the
/// request is next in line, so that a client that waits for it sends its body at once.
///
/// curl, and URLSession on Linux (libcurl), ask for it before bodies over 1 MiB; without an
/// answer, they wait a second before sending anyway: a 100 MiB blob upload measured 1.17 s with
/// the wait and 0.31 s without. Requests may be pipelined, so the `100` waits until every answer
/// to a request before it on the connection has ended, and is dropped when the request's own
/// answer starts first (a refusal that needs no body).
final class ExpectContinue: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    /// Requests passed on whose answers have not ended.
    private var inFlight = 0
    /// Whether the last request passed on waits for a `100` not sent yet.
    private var continuePending = false

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard case .head(var request) = unwrapInboundIn(data) else {
            context.fireChannelRead(data)
            return
        }
        inFlight += 1
        guard let expect = request.headerFields[.expect], expect.trimmingWhitespace.lowercased() == "100-continue" else {
            context.fireChannelRead(data)
            return
        }
        request.headerFields[.expect] = nil
        if inFlight == 1 {
            context.writeAndFlush(wrapOutboundOut(.head(HTTPResponse(status: .continue))), promise: nil)
        } else {
            continuePending = true
        }
        context.fireChannelRead(wrapInboundOut(.head(request)))
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        switch unwrapOutboundIn(data) {
        case .head where continuePending && inFlight == 1:
            continuePending = false  // its own answer comes first: no body is wanted any more
            context.write(data, promise: promise)
        case .end:
            inFlight -= 1
            context.write(data, promise: promise)
            if continuePending && inFlight == 1 {
                continuePending = false
                context.writeAndFlush(wrapOutboundOut(.head(HTTPResponse(status: .continue))), promise: nil)
            }
        default:
            context.write(data, promise: promise)
        }
    }
}

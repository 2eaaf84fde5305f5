import NIOCore
import NIOHTTP1

/// Tells `NotModifiedBeforeDecoding` when a response has ended: after writing each response's
/// end, it sends `Ended` toward the socket as an outbound user event, which that handler (nearer
/// the socket) takes, knowing that the response's last bytes are already queued ahead of anything
/// it writes next. Sits between NIO's HTTP/1 messages and the HTTP types codec, behind
/// `BlobFileBody`, so a blob's file region is written before the end is announced.
final class ResponseEnds: ChannelOutboundHandler, RemovableChannelHandler {
    typealias OutboundIn = HTTPServerResponsePart
    typealias OutboundOut = HTTPServerResponsePart

    /// The event: a response's end has been written.
    struct Ended: Sendable {}

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        guard case .end = unwrapOutboundIn(data) else { return context.write(data, promise: promise) }
        context.write(data, promise: promise)
        context.triggerUserOutboundEvent(Ended(), promise: nil)
    }
}

import HTTPTypes
import NIOCore
import NIOHTTPTypes

/// Closes a connection that has been idle for `timeout` (`ServerConfiguration.idleTimeout`),
/// counting what the raw path answers (`NotModifiedBeforeDecoding`) as activity too.
///
/// Hummingbird's own idle timeout sees only decoded requests, so it took a connection whose
/// requests the raw path answered (revalidations, live clients' waits) for idle, and closed it a
/// minute after its last routed request, in the middle of a wait. This handler sits behind the
/// HTTP codec, where it sees the router's requests and answers (a request is in progress from its
/// head until its answer's end); the raw path tells it of each request it takes and of each wait
/// it holds (`touch`, `rawWaiting`). A connection is closed only when no request is in progress,
/// none waits on the raw path, and nothing was read or answered for `timeout`. Partial bytes do
/// not count: a client sending a header block a byte at a time is closed as before.
final class ConnectionIdleness: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    private let timeout: TimeAmount
    private var lastActivity = NIODeadline.now()
    private var inProgress = 0
    /// A request waits on the raw path (`NotModifiedBeforeDecoding+Waiting`).
    var rawWaiting = false
    private var check: Scheduled<Void>?

    init(timeout: TimeAmount) {
        self.timeout = timeout
    }

    /// The raw path took a whole request, or answered one.
    func touch() { lastActivity = .now() }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { schedule(context, at: .now() + timeout) }
    }

    func channelActive(context: ChannelHandlerContext) {
        schedule(context, at: .now() + timeout)
        context.fireChannelActive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        check?.cancel()
        check = nil
    }

    func channelInactive(context: ChannelHandlerContext) {
        check?.cancel()
        check = nil
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if case .head = unwrapInboundIn(data) { inProgress += 1 }
        lastActivity = .now()
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if case .end = unwrapOutboundIn(data) { inProgress = max(0, inProgress - 1) }
        lastActivity = .now()
        context.write(data, promise: promise)
    }

    private func schedule(_ context: ChannelHandlerContext, at deadline: NIODeadline) {
        guard check == nil else { return }
        let bound = NIOLoopBound((handler: self, context: context), eventLoop: context.eventLoop)
        check = context.eventLoop.scheduleTask(deadline: deadline) {
            let (handler, context) = bound.value
            handler.check = nil
            handler.expire(context)
        }
    }

    /// The check: close, or look again when the connection could next be idle long enough.
    private func expire(_ context: ChannelHandlerContext) {
        guard context.channel.isActive else { return }
        let now = NIODeadline.now()
        if inProgress > 0 || rawWaiting { return schedule(context, at: now + timeout) }
        if now >= lastActivity + timeout { return context.close(promise: nil) }
        schedule(context, at: lastActivity + timeout)
    }
}

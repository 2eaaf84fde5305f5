import DeltaCore
import DeltaStore
import NIOCore
import Prometheus

/// `304`s from the raw bytes for a backend that must ask its database (`EarlyVerdict.ask`):
/// the question goes out asynchronously (the store shares one statement among every request
/// waiting), the connection reads nothing more until the answer is back, then the `304` is
/// written, or the request goes to the router (`+Routing`). A request found changed is
/// remembered (`changed`): what changed after a token stays changed, so when the connection
/// sends the same request again (a client repeating an old token) it goes to the router without
/// asking again. At worst that forgoes an early `304`; the router's answer is always right.
extension NotModifiedBeforeDecoding {
    /// Asks the store about the request at the front of `buffer` (`length` bytes).
    func askByRoundTrip(
        _ context: ChannelHandlerContext, _ buffer: ByteBuffer, request: RawRequest, length: Int, _ ask: @Sendable (@escaping EarlyVerdict.Reply) -> Void
    ) {
        waiting = true
        pending = buffer
        metrics.earlyRoundTrips.increment()
        let loop = context.eventLoop
        let bound = NIOLoopBound((handler: self, context: context), eventLoop: loop)
        ask { current in
            loop.execute { bound.value.handler.resume(bound.value.context, current, request: request, length: length) }
        }
    }

    /// Continues after the store answered: the `304` and the rest of the bytes, or the decoder.
    func resume(_ context: ChannelHandlerContext, _ current: (token: Token, digest: StateDigest)?, request: RawRequest, length: Int) {
        waiting = false
        guard !removed, context.channel.isActive else { return }
        var buffer = pending ?? context.channel.allocator.buffer(capacity: 0)
        pending = nil
        if let current, context.channel.isWritable {
            answer(context, current.token, current.digest)
            context.flush()
            buffer.moveReaderIndex(forwardBy: length)
            process(context, buffer)
            if passingThrough || routed { context.fireChannelReadComplete() }
        } else {
            if current == nil { changed = request }
            route(context, buffer, length: length)
            context.fireChannelReadComplete()
        }
        if readHeld, !waiting {
            readHeld = false
            context.read()
        }
    }

    /// Holds the socket's reads while a round trip is out (backpressure: nothing piles up here).
    func read(context: ChannelHandlerContext) {
        if waiting { readHeld = true } else { context.read() }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        removed = true
    }
}

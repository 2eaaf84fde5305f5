import NIOCore

/// Requests the raw path cannot answer, sent to the router one at a time so that the raw path
/// may take the connection back: the request goes to the decoder alone (its header block is
/// whole, and it has no body, so the decoder holds nothing after it), the bytes after it wait,
/// and when its response has ended (`ResponseEnds`) they are read here again. More than
/// `maximumHeaderBytes` waiting (a client pipelining many requests behind a slow one) hands the
/// connection to the decoder for good, as does the end of the client's input: nothing piles up.
extension NotModifiedBeforeDecoding {
    /// Sends the request at the front of `buffer` (`length` bytes) to the decoder and keeps the rest.
    func route(_ context: ChannelHandlerContext, _ buffer: ByteBuffer, length: Int) {
        var rest = buffer
        guard let request = rest.readSlice(length: length), rest.readableBytes <= Self.maximumHeaderBytes else {
            return passThrough(context, buffer)
        }
        // Set before the request goes: its response may end before `fireChannelRead` returns.
        routed = true
        pending = rest.readableBytes > 0 ? rest : nil
        context.fireChannelRead(wrapInboundOut(request))
    }

    /// Keeps `buffer` (what was waiting and what just came) until the routed response ends.
    func hold(_ context: ChannelHandlerContext, _ buffer: ByteBuffer) {
        guard buffer.readableBytes <= Self.maximumHeaderBytes else { return passThrough(context, buffer) }
        pending = buffer
    }

    /// Hands `buffer` and every later byte to the decoder, for the rest of the connection.
    func passThrough(_ context: ChannelHandlerContext, _ buffer: ByteBuffer) {
        routed = false
        passingThrough = true
        pending = nil
        if buffer.readableBytes > 0 { context.fireChannelRead(wrapInboundOut(buffer)) }
    }

    /// The routed response ended (`ResponseEnds.Ended`, after its last bytes were written): the
    /// waiting bytes are read here, on the next turn of the loop, not inside the write.
    func triggerUserOutboundEvent(context: ChannelHandlerContext, event: Any, promise: EventLoopPromise<Void>?) {
        guard event is ResponseEnds.Ended else { return context.triggerUserOutboundEvent(event, promise: promise) }
        promise?.succeed(())
        guard routed else { return }
        routed = false
        resuming = true
        let bound = NIOLoopBound((handler: self, context: context), eventLoop: context.eventLoop)
        context.eventLoop.execute {
            let (handler, context) = bound.value
            handler.resuming = false
            guard !handler.removed, !handler.routed, !handler.waiting, !handler.passingThrough, let waiting = handler.pending else { return }
            handler.pending = nil
            handler.process(context, waiting)
            context.fireChannelReadComplete()
        }
    }

    /// At the end of the client's input, the bytes waiting behind a routed request (its response
    /// still going, or just ended and their turn not yet come) go to the decoder before the event.
    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case ChannelEvent.inputClosed = event, routed || resuming, !passingThrough, let waiting = pending {
            passThrough(context, waiting)
        }
        context.fireUserInboundEventTriggered(event)
    }
}

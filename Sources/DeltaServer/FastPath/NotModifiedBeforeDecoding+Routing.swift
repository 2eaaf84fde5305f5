import NIOCore

/// Requests the raw path cannot answer, sent to the router one at a time so that the raw path
/// may take the connection back: the request goes to the decoder alone (its header block is
/// whole, and it has no body, so the decoder holds nothing after it), the bytes after it wait,
/// and when its response has ended (`ResponseEnds`) they are read here again. More than
/// `maximumHeaderBytes` waiting (a client pipelining many requests behind a slow one) hands the
/// connection to the decoder for good, as does the end of the client's input: nothing piles up.
/// Which of these holds is `RawPathStateMachine`'s to say; this carries out what it says.
extension NotModifiedBeforeDecoding {
    /// Sends the request at the front of `buffer` (`length` bytes) to the decoder and keeps the rest.
    func route(_ context: ChannelHandlerContext, _ buffer: ByteBuffer, length: Int) {
        switch machine.route(buffer, length: length) {
        case .route(let request), .forward(let request): toDecoder(context, request)
        }
    }

    /// The routed response ended (`ResponseEnds.Ended`, after its last bytes were written): the
    /// waiting bytes are read here, on the next turn of the loop, not inside the write.
    func triggerUserOutboundEvent(context: ChannelHandlerContext, event: Any, promise: EventLoopPromise<Void>?) {
        guard event is ResponseEnds.Ended else { return context.triggerUserOutboundEvent(event, promise: promise) }
        promise?.succeed(())
        guard machine.responseEnded() else { return }
        let bound = NIOLoopBound((handler: self, context: context), eventLoop: context.eventLoop)
        context.eventLoop.execute {
            let (handler, context) = bound.value
            guard let waiting = handler.machine.resume() else { return }
            handler.process(context, waiting)
            context.fireChannelReadComplete()
        }
    }

    /// At the end of the client's input, the bytes waiting here (behind a routed request, or the
    /// start of a request) go to the decoder before the event, and it reads on. A live client's
    /// request waiting here ends its wait first (`+Waiting`), and a request asked about by round
    /// trip gets its answer first: the event follows (`endInputAfterAnswer`).
    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        guard case ChannelEvent.inputClosed = event else { return context.fireUserInboundEventTriggered(event) }
        if endWaitEarly() { return }
        if machine.isAsking {
            inputEndedWhileAsking = true
            return
        }
        inputClosed(context)
    }

    /// The client's input ended: the bytes waiting here go to the decoder, then the event.
    func inputClosed(_ context: ChannelHandlerContext) {
        let (waiting, readHeld) = machine.inputClosed()
        decoderStarts()
        if let waiting, waiting.readableBytes > 0 { context.fireChannelRead(wrapInboundOut(waiting)) }
        if readHeld { context.read() }
        context.fireUserInboundEventTriggered(ChannelEvent.inputClosed)
    }
}

import NIOCore

/// Live clients' requests (`GET` or `HEAD /api/{collection}?wait=SECONDS`, docs/PROTOCOL.md "Live
/// updates") that would be answered `304` wait here, on the raw path: the connection keeps the
/// request's bytes and stops reading once more arrive (as for a round trip,
/// `RawPathStateMachine.asking`), and the `WaitingRoom` keeps a few words for it. No task, no
/// router and no decoded request exist while it waits, so a waiting request costs little more than
/// its connection (docs/OPERATIONS.md, "Live clients"). When the room ends the wait, the connection
/// answers (the `304`, or the answer shared by every request like it) and reads on, or hands the
/// request to the router as it came.
extension NotModifiedBeforeDecoding {
    /// Whether `request`, found not modified, waits here: it asks `?wait=` more than 0 seconds, and the server holds requests.
    func waits(_ request: RawRequest) -> Bool {
        guard let wait = request.wait, longPoll?.room != nil else { return false }
        return min(wait.seconds, maximumWait) > 0
    }

    /// Holds the request at the front of `buffer` (`length` bytes) in the room; when the room is
    /// full, the router answers it (its `503 too-many-waiting`). `readHeld`: a read the channel
    /// asked for is owed (done when the wait ends).
    func park(_ context: ChannelHandlerContext, _ buffer: ByteBuffer, request: RawRequest, length: Int, readHeld: Bool) {
        guard let longPoll, let room = longPoll.room, longPoll.admits(), let wait = request.wait,
            let headerBlock = buffer.getSlice(at: buffer.readerIndex, length: length)
        else {
            route(context, buffer, length: length)
            // Parked after a round trip, no read of the socket ends this cycle: NIO's
            // NIOAsyncChannelHandler hands the router what it decoded only at the end of one.
            context.fireChannelReadComplete()
            if readHeld, machine.readRequested() { context.read() }
            return
        }
        machine.ask(buffer, request: request, length: length, readHeld: readHeld)
        let loop = context.eventLoop
        let bound = NIOLoopBound((handler: self, context: context), eventLoop: loop)
        parked = room.enter(
            request, headerBlock: headerBlock, channel: context.channel, deadline: .now() + .seconds(Int64(min(wait.seconds, maximumWait)))
        ) { outcome in
            loop.execute { bound.value.handler.woken(bound.value.context, outcome) }
        }
        longPoll.roomEntered()
    }

    /// The room ended the wait; then the end of the client's input, if it came meanwhile.
    func woken(_ context: ChannelHandlerContext, _ outcome: WaitingRoom.Outcome) {
        parked = nil
        guard let resumption = machine.roundTripAnswered() else { return }
        guard context.channel.isActive else { return }
        resume(context, resumption, outcome)
        endInputAfterAnswer(context)
    }

    /// The client ended its input while its request waits (it half-closed, or went away): the wait
    /// ends now, as at its deadline, and the event follows the answer. A client gone is thus let
    /// go at once, and one that only half-closed still gets its answer.
    func endWaitEarly() -> Bool {
        guard let ticket = parked, let longPoll else { return false }
        // Not in the room any more: its end is already on its way to this connection (`woken`).
        if longPoll.room?.hurry(ticket) == true { longPoll.nudge() }
        inputEndedWhileAsking = true
        return true
    }

    /// After an answer, the end of the client's input that came while its request waited or was
    /// asked about (`inputEndedWhileAsking`): a request behind it that now waits in the room ends
    /// its wait at once too, and one now asked about by round trip is waited for; the event
    /// follows the last of their answers. No request keeps a place in the room, or goes to the
    /// router to wait there, for a client whose input has ended.
    func endInputAfterAnswer(_ context: ChannelHandlerContext) {
        guard inputEndedWhileAsking else { return }
        inputEndedWhileAsking = false
        if endWaitEarly() { return }
        if machine.isAsking {
            inputEndedWhileAsking = true
            return
        }
        inputClosed(context)
    }

    /// Writes a shared answer (not flushed) with this moment's `Date`, and counts it.
    func send(_ context: ChannelHandlerContext, _ request: RawRequest, _ shared: SharedAnswer) {
        var out = context.channel.allocator.buffer(capacity: shared.head.readableBytes + 40)
        out.writeImmutableBuffer(shared.head)
        out.writeImmutableBuffer(dateLine())
        context.write(wrapOutboundOut(out), promise: nil)
        if shared.body.readableBytes > 0 { context.write(wrapOutboundOut(shared.body), promise: nil) }
        metrics.request(route: "/api/{collection}", method: request.method, status: shared.status, microseconds: nil)
    }

    /// The connection closed: its request no longer waits, and Hummingbird's side ends (it may never have started).
    func channelInactive(context: ChannelHandlerContext) {
        leaveRoom()
        decoderStarts()
        context.fireChannelInactive()
    }

    /// Takes this connection's request out of the room, if it waits there.
    func leaveRoom() {
        guard let ticket = parked else { return }
        parked = nil
        longPoll?.room?.leave(ticket)
    }
}

import DeltaCore
import DeltaStore
import NIOCore
import Prometheus

/// `304`s from the raw bytes for a backend that must ask its database (`EarlyVerdict.ask`): the
/// question goes out asynchronously (the store shares one statement among every request waiting),
/// bytes that come meanwhile wait (and once any have, the connection reads nothing more) until the
/// answer is back, then the `304` is written, or the request goes to the router (`+Routing`). A
/// request found changed is remembered (`changed`): what changed after a token stays changed, so
/// when the connection sends the same request again (a client repeating an old token) it goes to
/// the router without asking again. At worst that forgoes an early `304`; the router's answer is
/// always right.
extension NotModifiedBeforeDecoding {
    /// Asks the store about the request at the front of `buffer` (`length` bytes).
    func askByRoundTrip(
        _ context: ChannelHandlerContext, _ buffer: ByteBuffer, request: RawRequest, length: Int, _ ask: @Sendable (@escaping EarlyVerdict.Reply) -> Void
    ) {
        machine.ask(buffer, request: request, length: length)
        metrics.earlyRoundTrips.increment()
        let loop = context.eventLoop
        let bound = NIOLoopBound((handler: self, context: context), eventLoop: loop)
        ask { current in
            loop.execute { bound.value.handler.roundTripAnswered(bound.value.context, current) }
        }
    }

    /// Continues after the store answered: the `304` and the rest of the bytes, or the decoder;
    /// a live client's request found not modified waits (`+Waiting`).
    func roundTripAnswered(_ context: ChannelHandlerContext, _ current: (token: Token, digest: StateDigest)?) {
        guard let resumption = machine.roundTripAnswered() else { return }
        guard context.channel.isActive else { return }
        if current != nil, waits(resumption.request) {
            // Routed instead when the room is full: its cycle is ended there (`park`).
            park(context, resumption.buffer, request: resumption.request, length: resumption.length, readHeld: resumption.readHeld)
        } else {
            if current == nil { changed = resumption.request }
            resume(context, resumption, current.map { .notModified($0.token, $0.digest) } ?? .route)
        }
        endInputAfterAnswer(context)
    }

    /// Ends a wait for the store or a change (`resumption`, the state machine's): the `304` or the
    /// shared answer and then the rest of the bytes, or the request to the decoder.
    func resume(_ context: ChannelHandlerContext, _ resumption: RawPathStateMachine.Resumption, _ outcome: WaitingRoom.Outcome) {
        var resumption = resumption
        idleness?.touch()
        switch outcome {
        case .notModified(let token, let digest) where context.channel.isWritable:
            answer(context, resumption.request, token, digest)
        case .answer(let shared) where context.channel.isWritable:
            send(context, resumption.request, shared)
        default:
            route(context, resumption.buffer, length: resumption.length)
            context.fireChannelReadComplete()
            if resumption.readHeld, machine.readRequested() { context.read() }
            return
        }
        context.flush()
        resumption.buffer.moveReaderIndex(forwardBy: resumption.length)
        process(context, resumption.buffer)
        if machine.decoderHasRequest { context.fireChannelReadComplete() }
        if resumption.readHeld, machine.readRequested() { context.read() }
    }

    /// Holds the socket's reads while a round trip or a wait is out and bytes already wait behind
    /// its request (backpressure: nothing piles up here); passes them on while none do.
    func read(context: ChannelHandlerContext) {
        if machine.readRequested() { context.read() }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        machine.removed()
        leaveRoom()
        decoderStarts()
    }
}

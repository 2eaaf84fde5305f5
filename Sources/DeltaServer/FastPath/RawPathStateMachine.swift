import NIOCore

/// Who reads a connection's bytes, the raw `304` path or NIO's HTTP/1 decoder, and where the
/// bytes not yet read wait: one state, changed only here.
///
/// In the manner of swift-nio's HTTP server upgrader state machine, `NotModifiedBeforeDecoding`
/// tells it each event on the connection (bytes read, a request found and what the store said of
/// it, a response ended, a round trip answered, a read asked for, the input closed, the handler
/// removed) and carries out the action it returns; the machine touches no channel, so every
/// transition can be driven on its own (`RawPathStateMachineTests`). The rules it keeps:
/// - Responses never overtake one another: bytes after a request the router answers wait until
///   that response has ended; bytes after a request the store is asked about wait for the answer.
/// - Nothing piles up: more than `maximumHeaderBytes` waiting, or a request that is not plain,
///   hands the connection to the decoder for good (`passingThrough`).
/// - A byte is read once: by the raw path or by the decoder, in order, never both.
struct RawPathStateMachine {
    /// Where a connection stands.
    enum State {
        /// The raw path reads the connection; `pending` is the start of a request not yet whole.
        case reading(pending: ByteBuffer?)
        /// The store is asked about `request`, the first `length` bytes of `pending` (a round
        /// trip), or the request waits for a change (a live client's `?wait=`, `WaitingRoom`);
        /// bytes read meanwhile join `pending`; once any have, the channel's next read is held
        /// (`readHeld`, done once the answer is in), so at most the read cycle that brought them
        /// adds more, and past `maximumHeaderBytes` the decoder takes the connection.
        case asking(pending: ByteBuffer, request: RawRequest, length: Int, readHeld: Bool)
        /// A request went to the decoder alone; the bytes after it wait until its response ends.
        case routed(pending: ByteBuffer?)
        /// That response ended; the bytes that waited are read on the loop's next turn (not
        /// inside the write that ended it).
        case resuming(pending: ByteBuffer?)
        /// Every byte goes to the decoder, for the rest of the connection.
        case passingThrough
        /// The handler has left the pipeline: late events (a round trip's answer) do nothing.
        case removed
    }

    /// Bytes read from the socket: what to do with them.
    enum ReadAction {
        /// Read them here (`next`), from their first byte.
        case process(ByteBuffer)
        /// Hand them to the decoder.
        case forward(ByteBuffer)
        /// Keep them (done): they wait for an answer or for a response to end.
        case wait
        /// Too much came behind a request the store is asked about: hand these bytes (that request
        /// first) to the decoder, for good, and do the read the channel asked for meanwhile.
        case handOver(ByteBuffer, readHeld: Bool)
    }

    /// The front of the bytes being read.
    enum Step {
        /// A plain request, its header block the first `length` bytes: the store is asked, and
        /// the handler answers it (and reads on), or calls `ask` or `route`.
        case request(RawRequest, length: Int)
        /// Nothing left, or the start of a request not yet whole (kept until more bytes come).
        case needMore
        /// Not a plain request: these bytes and every later one go to the decoder.
        case forward(ByteBuffer)
    }

    /// A request the raw path cannot answer: how it goes to the decoder.
    enum RouteAction {
        /// Its header block alone goes to the decoder; the bytes after it wait (`routed`).
        case route(ByteBuffer)
        /// Too much waits behind it: everything goes to the decoder, for good.
        case forward(ByteBuffer)
    }

    /// A round trip's answer arrived: the request it was about and the bytes that waited.
    struct Resumption {
        /// The bytes that waited, the request asked about at their front.
        var buffer: ByteBuffer
        let request: RawRequest
        /// The request's header block's length.
        let length: Int
        /// The channel asked for a read meanwhile.
        let readHeld: Bool
    }

    private(set) var state: State = .reading(pending: nil)
    /// The longest header block waited for, and the most bytes kept waiting behind a request.
    let maximumHeaderBytes: Int

    init(maximumHeaderBytes: Int) {
        self.maximumHeaderBytes = maximumHeaderBytes
    }

    /// Whether every byte goes to the decoder now (the handler's fast path checks this first).
    var isPassingThrough: Bool {
        if case .passingThrough = state { return true }
        return false
    }

    /// Whether a request is asked about: a round trip or a wait is out (`asking`).
    var isAsking: Bool {
        if case .asking = state { return true }
        return false
    }

    /// Whether the decoder has bytes it has not finished with: a request routed, or the connection
    /// handed over (after a round trip, the handler then ends the read for it).
    var decoderHasRequest: Bool {
        switch state {
        case .routed, .passingThrough: return true
        default: return false
        }
    }

    // MARK: - Events

    /// Bytes read from the socket.
    mutating func channelRead(_ buffer: ByteBuffer) -> ReadAction {
        switch state {
        case .reading(var pending), .resuming(var pending):
            // Bytes after a response ended are read at once (the loop's turn that was due finds nothing).
            state = .reading(pending: nil)
            return .process(Self.append(buffer, to: &pending))
        case .asking(var pending, let request, let length, let readHeld):
            // The state, then `pending`, let go of the bytes, so that `waiting` alone holds them.
            state = .reading(pending: nil)
            var waiting: ByteBuffer? = pending
            pending = ByteBuffer()
            let joined = Self.append(buffer, to: &waiting)
            // Too much behind the request asked about: the decoder reads it all, that request included.
            guard joined.readableBytes - length <= maximumHeaderBytes else {
                state = .passingThrough
                return .handOver(joined, readHeld: readHeld)
            }
            state = .asking(pending: joined, request: request, length: length, readHeld: readHeld)
            return .wait
        case .routed(var pending):
            state = .reading(pending: nil)
            let waiting = Self.append(buffer, to: &pending)
            guard waiting.readableBytes <= maximumHeaderBytes else {
                state = .passingThrough
                return .forward(waiting)
            }
            state = .routed(pending: waiting)
            return .wait
        case .passingThrough, .removed:
            return .forward(buffer)
        }
    }

    /// Reads the front of `buffer` (while `reading`): a plain request, or more bytes needed (kept
    /// in `pending`), or bytes for the decoder from now on.
    mutating func next(_ buffer: ByteBuffer) -> Step {
        guard case .reading = state else { preconditionFailure("RawPathStateMachine.next: not reading (\(state))") }
        guard buffer.readableBytes > 0 else {
            state = .reading(pending: nil)
            return .needMore
        }
        switch buffer.withUnsafeReadableBytes({ RawRequest.parse($0, limit: maximumHeaderBytes) }) {
        case .incomplete:
            state = .reading(pending: buffer)
            return .needMore
        case .request(let request, let length):
            return .request(request, length: length)
        case .other:
            state = .passingThrough
            return .forward(buffer)
        }
    }

    /// The request at the front of `buffer` (`length` bytes) is asked about with a round trip, or
    /// waits for a change (a live client's, `WaitingRoom`); `readHeld`: a read is owed already.
    mutating func ask(_ buffer: ByteBuffer, request: RawRequest, length: Int, readHeld: Bool = false) {
        guard case .reading = state else { preconditionFailure("RawPathStateMachine.ask: not reading (\(state))") }
        state = .asking(pending: buffer, request: request, length: length, readHeld: readHeld)
    }

    /// The request at the front of `buffer` (`length` bytes) goes to the router.
    mutating func route(_ buffer: ByteBuffer, length: Int) -> RouteAction {
        guard case .reading = state else { preconditionFailure("RawPathStateMachine.route: not reading (\(state))") }
        var rest = buffer
        guard let request = rest.readSlice(length: length), rest.readableBytes <= maximumHeaderBytes else {
            state = .passingThrough
            return .forward(buffer)
        }
        // Set before the request goes: its response may end before it returns.
        state = .routed(pending: rest.readableBytes > 0 ? rest : nil)
        return .route(request)
    }

    /// The connection cannot take more answers now (not writable): the decoder reads the rest.
    mutating func handOver(_ buffer: ByteBuffer) -> ByteBuffer {
        state = .passingThrough
        return buffer
    }

    /// A routed response has ended: true when the waiting bytes are to be read on the loop's
    /// next turn (`resume`).
    mutating func responseEnded() -> Bool {
        guard case .routed(let pending) = state else { return false }
        state = .resuming(pending: pending)
        return true
    }

    /// The loop's turn after a routed response ended: the bytes that waited, to read now (nil
    /// when none waited, or when the connection moved on meanwhile).
    mutating func resume() -> ByteBuffer? {
        guard case .resuming(let pending) = state else { return nil }
        state = .reading(pending: nil)
        return pending
    }

    /// A round trip answered: the bytes that waited for it (nil when the connection moved on
    /// meanwhile: the input closed, or the handler was removed).
    mutating func roundTripAnswered() -> Resumption? {
        guard case .asking(let pending, let request, let length, let readHeld) = state else { return nil }
        state = .reading(pending: nil)
        return Resumption(buffer: pending, request: request, length: length, readHeld: readHeld)
    }

    /// The channel asks for a read: true to read now; false while a round trip is out and bytes
    /// already wait behind the request asked about (the read is done when the answer is in).
    ///
    /// While nothing waits behind it, the read goes on: a client that sends one request at a
    /// time sends nothing meanwhile, and holding the read would cost two `epoll_ctl` calls per
    /// request (6.5% of the server's samples in PostgreSQL `304`s). A client that pipelines gets
    /// one read's bytes in, then the read waits; more than `maximumHeaderBytes` behind the
    /// request hands the connection to the decoder (`channelRead`), as before.
    mutating func readRequested() -> Bool {
        guard case .asking(let pending, let request, let length, _) = state else { return true }
        guard pending.readableBytes > length else { return true }
        state = .asking(pending: pending, request: request, length: length, readHeld: true)
        return false
    }

    /// The client ended its input: bytes waiting here (behind a routed request, or an incomplete
    /// request) go to the decoder before the event does, and it reads the rest. The handler
    /// waits for a round trip's answer before it says so (`endInputAfterAnswer`); said while
    /// `asking`, the request asked about goes too, and `readHeld` is the read due now.
    mutating func inputClosed() -> (waiting: ByteBuffer?, readHeld: Bool) {
        switch state {
        case .reading(let pending), .routed(let pending), .resuming(let pending):
            state = .passingThrough
            return (pending, false)
        case .asking(let pending, _, _, let readHeld):
            state = .passingThrough
            return (pending, readHeld)
        case .passingThrough, .removed:
            return (nil, false)
        }
    }

    /// The handler left the pipeline.
    mutating func removed() {
        state = .removed
    }

    /// `earlier` and then `later`, as one buffer (`later` alone when nothing waited). `earlier` is
    /// the only holder of its bytes here (the state let go of them first), so they are appended
    /// to in place, not copied.
    private static func append(_ later: ByteBuffer, to earlier: inout ByteBuffer?) -> ByteBuffer {
        guard earlier != nil else { return later }
        var later = later
        earlier!.writeBuffer(&later)
        return earlier!
    }
}

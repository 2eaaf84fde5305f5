import DeltaCore
import DeltaStore
import Foundation
import NIOCore
import NIOEmbedded
import Synchronization
import Testing

@testable import DeltaServer

/// The raw `304` path frame by frame: `RawPathStateMachine` on its own, then
/// `NotModifiedBeforeDecoding` on an `EmbeddedChannel` with a store that answers as told (what
/// reaches the decoder is what `readInbound` returns; what is written, `readOutbound`).
@Suite("The raw path's state machine, frame by frame")
struct RawPathStateMachineTests {
    // MARK: - The machine alone

    private func buffer(_ text: String) -> ByteBuffer { ByteBuffer(string: text) }
    private static let plain = "GET /api/w HTTP/1.1\r\nIf-None-Match: x\r\n\r\n"

    @Test("Reading: a whole request is found, a partial one waits, anything else hands over for good")
    func reading() {
        var machine = RawPathStateMachine(maximumHeaderBytes: 100)
        guard case .process(let first) = machine.channelRead(buffer("GET /api/w HT")) else {
            Issue.record("not processed")
            return
        }
        guard case .needMore = machine.next(first) else {
            Issue.record("a partial request is not kept")
            return
        }
        guard case .reading(pending: .some) = machine.state else {
            Issue.record("nothing pending: \(machine.state)")
            return
        }
        guard case .process(let whole) = machine.channelRead(buffer("TP/1.1\r\nIf-None-Match: x\r\n\r\n")) else {
            Issue.record("not processed")
            return
        }
        #expect(String(buffer: whole) == Self.plain, "the partial bytes come first")
        guard case .request(let request, let length) = machine.next(whole) else {
            Issue.record("not a request")
            return
        }
        #expect(request.collection == "w" && request.ifNoneMatch == "x" && length == Self.plain.utf8.count)
        guard case .forward(let rest) = machine.next(buffer("POST /api/w HTTP/1.1\r\n\r\n")) else {
            Issue.record("not handed over")
            return
        }
        #expect(String(buffer: rest).hasPrefix("POST"))
        #expect(machine.isPassingThrough)
        guard case .forward = machine.channelRead(buffer(Self.plain)) else {
            Issue.record("read again after handing over")
            return
        }
    }

    @Test("Routed: the bytes behind wait until the response ends and are read on the next turn; too many hand over")
    func routed() {
        var machine = RawPathStateMachine(maximumHeaderBytes: 100)
        let ended1 = machine.responseEnded()
        #expect(!ended1, "no response to end")
        guard case .process(let both) = machine.channelRead(buffer(Self.plain + "GET /api/w")) else {
            Issue.record("not processed")
            return
        }
        guard case .request(_, let length) = machine.next(both), case .route(let request) = machine.route(both, length: length) else {
            Issue.record("not routed")
            return
        }
        #expect(String(buffer: request) == Self.plain, "the request's header block alone")
        guard case .wait = machine.channelRead(buffer(" HTTP/1.1\r\n")) else {
            Issue.record("read while routed")
            return
        }
        let resumed2 = machine.resume()
        #expect(resumed2 == nil, "nothing resumes before the response ends")
        let ended3 = machine.responseEnded()
        #expect(ended3)
        guard case .resuming(pending: .some(let waiting)) = machine.state else {
            Issue.record("not resuming: \(machine.state)")
            return
        }
        #expect(String(buffer: waiting) == "GET /api/w HTTP/1.1\r\n")
        let ended4 = machine.responseEnded()
        #expect(!ended4, "one end per routed request")
        let resumed5 = machine.resume()
        #expect(resumed5.map { String(buffer: $0) } == "GET /api/w HTTP/1.1\r\n")
        guard case .reading(pending: nil) = machine.state else {
            Issue.record("not reading: \(machine.state)")
            return
        }

        // More than the limit behind a routed request: everything to the decoder, for good.
        guard case .process(let again) = machine.channelRead(buffer(Self.plain)), case .request(_, let length2) = machine.next(again),
            case .route = machine.route(again, length: length2)
        else {
            Issue.record("not routed")
            return
        }
        guard case .forward(let all) = machine.channelRead(buffer(String(repeating: "x", count: 101))) else {
            Issue.record("not handed over")
            return
        }
        #expect(all.readableBytes == 101)
        #expect(machine.isPassingThrough)
        let ended6 = machine.responseEnded()
        #expect(!ended6, "a response ending after the hand-over resumes nothing")
    }

    @Test("A read on the loop's turn before the resumption is read at once; the turn then finds nothing")
    func readWhileResuming() {
        var machine = RawPathStateMachine(maximumHeaderBytes: 100)
        guard case .process(let both) = machine.channelRead(buffer(Self.plain + "GET")), case .request(_, let length) = machine.next(both),
            case .route = machine.route(both, length: length)
        else {
            Issue.record("not routed")
            return
        }
        let ended7 = machine.responseEnded()
        #expect(ended7)
        guard case .process(let joined) = machine.channelRead(buffer(" /api/w HTTP/1.1\r\n\r\n")) else {
            Issue.record("not processed")
            return
        }
        #expect(String(buffer: joined) == "GET /api/w HTTP/1.1\r\n\r\n")
        let resumed8 = machine.resume()
        #expect(resumed8 == nil)
    }

    @Test("Asking: bytes wait, a read after them waits for the answer, the answer gives back the request and the bytes")
    func asking() {
        var machine = RawPathStateMachine(maximumHeaderBytes: 100)
        guard case .process(let first) = machine.channelRead(buffer(Self.plain)), case .request(let request, let length) = machine.next(first) else {
            Issue.record("not a request")
            return
        }
        let mayRead9 = machine.readRequested()
        #expect(mayRead9, "reads flow while nothing is asked")
        machine.ask(first, request: request, length: length)
        let mayRead10 = machine.readRequested()
        #expect(mayRead10, "reads flow while nothing waits behind the request asked about")
        guard case .wait = machine.channelRead(buffer("GET")) else {
            Issue.record("read while asking")
            return
        }
        let mayRead10b = machine.readRequested()
        #expect(!mayRead10b, "once bytes wait behind it, a read waits for the answer")
        let resumption = machine.roundTripAnswered()
        #expect(resumption?.request == request && resumption?.length == length && resumption?.readHeld == true)
        #expect(resumption.map { String(buffer: $0.buffer) } == Self.plain + "GET")
        let noResumption11 = machine.roundTripAnswered() == nil
        #expect(noResumption11, "one answer per question")
        let mayRead12 = machine.readRequested()
        #expect(mayRead12)
    }

    @Test("Asking: too many bytes behind the request asked about hand everything to the decoder, and the held read is done")
    func askingOverflow() {
        var machine = RawPathStateMachine(maximumHeaderBytes: 100)
        guard case .process(let first) = machine.channelRead(buffer(Self.plain)), case .request(let request, let length) = machine.next(first) else {
            Issue.record("not a request")
            return
        }
        machine.ask(first, request: request, length: length)
        let mayRead = machine.readRequested()
        #expect(mayRead, "nothing waits behind the request yet")
        guard case .wait = machine.channelRead(buffer(String(repeating: "x", count: 100))) else {
            Issue.record("100 bytes behind the request should wait")
            return
        }
        let mayReadAfter = machine.readRequested()
        #expect(!mayReadAfter)
        guard case .handOver(let all, let readHeld) = machine.channelRead(buffer("y")) else {
            Issue.record("101 bytes behind the request should hand over")
            return
        }
        #expect(String(buffer: all) == Self.plain + String(repeating: "x", count: 100) + "y", "the request asked about first")
        #expect(readHeld)
        #expect(machine.isPassingThrough)
        let noResumption = machine.roundTripAnswered() == nil
        #expect(noResumption, "the late answer does nothing")
    }

    @Test("Half-close: whatever waits goes to the decoder before the event, and a held read is due")
    func halfClose() {
        for setup in ["partial", "routed", "asking", "askingAlone", "reading"] {
            var machine = RawPathStateMachine(maximumHeaderBytes: 100)
            let bytes = ["partial": "GET /api", "reading": Self.plain, "askingAlone": Self.plain][setup] ?? Self.plain + "GET"
            guard case .process(let first) = machine.channelRead(buffer(bytes)) else { continue }
            var readHeld = false
            switch (setup, machine.next(first)) {
            case ("routed", .request(_, let length)): _ = machine.route(first, length: length)
            case ("asking", .request(let request, let length)), ("askingAlone", .request(let request, let length)):
                machine.ask(first, request: request, length: length)
                readHeld = !machine.readRequested()
                // Held only with bytes behind the request asked about.
                #expect(readHeld == (setup == "asking"), "\(setup)")
            case ("reading", .request(_, let length)):
                // Answered here: the handler reads on past it, and finds nothing more.
                var rest = first
                rest.moveReaderIndex(forwardBy: length)
                _ = machine.next(rest)
            default: break
            }
            let (waiting, held) = machine.inputClosed()
            let expected: String? = ["partial": "GET /api", "routed": "GET", "asking": Self.plain + "GET", "askingAlone": Self.plain, "reading": nil][setup]!
            #expect(waiting.map { String(buffer: $0) } == expected, "\(setup)")
            #expect(held == readHeld, "\(setup)")
            #expect(machine.isPassingThrough, "\(setup)")
            let noResumption13 = machine.roundTripAnswered() == nil
            #expect(noResumption13, "\(setup): a late answer does nothing")
        }
    }

    @Test("Removed: late answers and ends do nothing")
    func removed() {
        var machine = RawPathStateMachine(maximumHeaderBytes: 100)
        guard case .process(let first) = machine.channelRead(buffer(Self.plain)), case .request(let request, let length) = machine.next(first) else {
            Issue.record("not a request")
            return
        }
        machine.ask(first, request: request, length: length)
        machine.removed()
        let noResumption14 = machine.roundTripAnswered() == nil
        #expect(noResumption14)
        let ended15 = machine.responseEnded()
        #expect(!ended15)
        let resumed16 = machine.resume()
        #expect(resumed16 == nil)
    }

    // MARK: - The handler on an EmbeddedChannel

    /// A store that says `304` to the token at position 7, asks a round trip for position 8
    /// (kept in `questions` until the test answers), and knows nothing else.
    final class ToldVerdicts: EarlyVerdicts {
        static let current = Token(database: 1, position: 7, commit: 1)
        static let asked = Token(database: 1, position: 8, commit: 1)
        let questions = Mutex<[EarlyVerdict.Reply]>([])

        func earlyVerdict(_ collection: CollectionName, since: Since) -> EarlyVerdict {
            guard case .token(let token) = since else { return .unknown }
            if token == Self.current { return .notModified(Self.current, .empty) }
            if token == Self.asked { return .ask { reply in self.questions.withLock { $0.append(reply) } } }
            return .unknown
        }

        /// Answers the oldest question.
        func answer(_ current: (token: Token, digest: StateDigest)?) {
            let reply = questions.withLock { $0.removeFirst() }
            reply(current)
        }
    }

    private static func get(_ token: Token, _ extra: String = "") -> String {
        "GET /api/w HTTP/1.1\r\nHost: x\r\nIf-None-Match: \(token)\r\n\(extra)\r\n"
    }

    /// A connected channel (a round trip's answer is written only to an active one).
    private func channel(_ verdicts: ToldVerdicts) throws -> EmbeddedChannel {
        let handler = NotModifiedBeforeDecoding(verdicts: verdicts, metrics: ServerMetrics(), answers: AnswerCache(maximumBytes: 1 << 20))
        let channel = EmbeddedChannel(handler: handler)
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 9)).wait()
        return channel
    }

    /// What reached the decoder since the last call, as text.
    private func decoded(_ channel: EmbeddedChannel) throws -> [String] {
        var out: [String] = []
        while let part = try channel.readInbound(as: ByteBuffer.self) { out.append(String(buffer: part)) }
        return out
    }

    /// The status lines written since the last call.
    private func written(_ channel: EmbeddedChannel) throws -> [String] {
        var text = ""
        while let part = try channel.readOutbound(as: ByteBuffer.self) { text += String(buffer: part) }
        return text.components(separatedBy: "\r\n").filter { $0.hasPrefix("HTTP/1.1 ") }
    }

    /// The router's response to the routed request ends (what `ResponseEnds` says), and the loop turns.
    private func endResponse(_ channel: EmbeddedChannel) {
        channel.pipeline.syncOperations.triggerUserOutboundEvent(ResponseEnds.Ended(), promise: nil)
        channel.embeddedEventLoop.run()
    }

    @Test("Pipelined 304s in one read are answered in order; a request cut in three reads is answered once whole")
    func pipeliningAndPartialReads() throws {
        let verdicts = ToldVerdicts()
        let channel = try channel(verdicts)
        let request = Self.get(ToldVerdicts.current)
        try channel.writeInbound(ByteBuffer(string: request + request + request))
        #expect(try written(channel) == Array(repeating: "HTTP/1.1 304 Not Modified", count: 3))
        let bytes = Array(request.utf8)
        for piece in [bytes[0..<5], bytes[5..<30], bytes[30...]] {
            try channel.writeInbound(ByteBuffer(bytes: piece))
        }
        #expect(try written(channel) == ["HTTP/1.1 304 Not Modified"])
        #expect(try decoded(channel).isEmpty, "nothing reached the decoder")
        _ = try channel.finish()
    }

    @Test("A request with a body, or Connection: close, hands the connection to the decoder for good, bytes in order")
    func bodyAndClose() throws {
        for tail in ["Content-Length: 2\r\n\r\nhi", "Connection: close\r\n\r\n"] {
            let channel = try channel(ToldVerdicts())
            let current = Self.get(ToldVerdicts.current)
            let other = "GET /api/w HTTP/1.1\r\nHost: x\r\n\(tail)"
            try channel.writeInbound(ByteBuffer(string: current + other + current))
            #expect(try written(channel) == ["HTTP/1.1 304 Not Modified"])
            #expect(try decoded(channel) == [other + current], "\(tail.debugDescription)")
            try channel.writeInbound(ByteBuffer(string: current))
            #expect(try decoded(channel) == [current], "passing through after \(tail.debugDescription)")
            #expect(try written(channel).isEmpty)
            _ = try channel.finish()
        }
    }

    @Test("A routed request's response still running: later bytes wait, then are read here on the next turn (the hand-back)")
    func responseStillRunningAndHandBack() throws {
        let channel = try channel(ToldVerdicts())
        let unknown = Self.get(Token(database: 1, position: 3, commit: 1))
        let current = Self.get(ToldVerdicts.current)
        try channel.writeInbound(ByteBuffer(string: unknown + current))
        #expect(try decoded(channel) == [unknown], "the routed request alone")
        try channel.writeInbound(ByteBuffer(string: current))
        #expect(try written(channel).isEmpty, "no 304 overtakes the routed response")
        endResponse(channel)
        #expect(try written(channel) == ["HTTP/1.1 304 Not Modified", "HTTP/1.1 304 Not Modified"])
        #expect(try decoded(channel).isEmpty)
        // Handed back: the next request is read here again.
        try channel.writeInbound(ByteBuffer(string: current))
        #expect(try written(channel) == ["HTTP/1.1 304 Not Modified"])
        _ = try channel.finish()
    }

    @Test("Half-close behind a routed request: the waiting bytes reach the decoder before the event")
    func halfCloseBehindRoutedRequest() throws {
        let channel = try channel(ToldVerdicts())
        let unknown = Self.get(Token(database: 1, position: 3, commit: 1))
        let current = Self.get(ToldVerdicts.current)
        let events = EventRecorder()
        try channel.pipeline.syncOperations.addHandler(events)
        try channel.writeInbound(ByteBuffer(string: unknown + current))
        channel.pipeline.fireUserInboundEventTriggered(ChannelEvent.inputClosed)
        #expect(events.seen == ["read \(unknown.utf8.count)", "read \(current.utf8.count)", "inputClosed"])
        endResponse(channel)
        #expect(try written(channel).isEmpty, "nothing answered here after the hand-over")
        _ = try channel.finish(acceptAlreadyClosed: true)
    }

    @Test("A round trip: bytes behind the question wait for the answer; current is a 304, changed goes to the router and is not asked again")
    func roundTrip() throws {
        let verdicts = ToldVerdicts()
        let channel = try channel(verdicts)
        let asked = Self.get(ToldVerdicts.asked)
        let current = Self.get(ToldVerdicts.current)
        try channel.writeInbound(ByteBuffer(string: asked))
        try channel.writeInbound(ByteBuffer(string: current))
        let questions17 = verdicts.questions.withLock { $0.count }
        #expect(questions17 == 1)
        #expect(try written(channel).isEmpty, "the current one waits behind the question")
        verdicts.answer((ToldVerdicts.asked, .empty))
        channel.embeddedEventLoop.run()
        #expect(try written(channel) == ["HTTP/1.1 304 Not Modified", "HTTP/1.1 304 Not Modified"])
        // Found changed: routed, and remembered.
        try channel.writeInbound(ByteBuffer(string: asked + current))
        verdicts.answer(nil)
        channel.embeddedEventLoop.run()
        #expect(try decoded(channel) == [asked])
        endResponse(channel)
        #expect(try written(channel) == ["HTTP/1.1 304 Not Modified"])
        try channel.writeInbound(ByteBuffer(string: asked))
        let questions18 = verdicts.questions.withLock { $0.isEmpty }
        #expect(questions18, "the same request is not asked again")
        #expect(try decoded(channel) == [asked])
        _ = try channel.finish()
    }

    @Test("A round trip: reads go on while nothing waits behind the question, stop once bytes do, and resume with the answer")
    func readsDuringRoundTrip() throws {
        let verdicts = ToldVerdicts()
        let reads = ReadCounter()
        let channel = EmbeddedChannel()
        try channel.pipeline.syncOperations.addHandlers([
            reads,
            NotModifiedBeforeDecoding(verdicts: verdicts, metrics: ServerMetrics(), answers: AnswerCache(maximumBytes: 1 << 20)),
        ])
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 9)).wait()
        let asked = Self.get(ToldVerdicts.asked)
        try channel.writeInbound(ByteBuffer(string: asked))
        channel.read()
        #expect(reads.count == 1, "nothing behind the question: the read goes on")
        try channel.writeInbound(ByteBuffer(string: Self.get(ToldVerdicts.current)))
        channel.read()
        #expect(reads.count == 1, "a request behind the question: the read waits")
        verdicts.answer((ToldVerdicts.asked, .empty))
        channel.embeddedEventLoop.run()
        #expect(try written(channel) == ["HTTP/1.1 304 Not Modified", "HTTP/1.1 304 Not Modified"])
        #expect(reads.count == 2, "the read that waited is done once the answer is in")
        // Nothing came behind the next question: the read went on, and no other is owed after it.
        try channel.writeInbound(ByteBuffer(string: asked))
        channel.read()
        #expect(reads.count == 3)
        verdicts.answer((ToldVerdicts.asked, .empty))
        channel.embeddedEventLoop.run()
        #expect(try written(channel) == ["HTTP/1.1 304 Not Modified"])
        #expect(reads.count == 3, "no read was held, so none is done for it")
        _ = try channel.finish()
    }

    /// Counts the reads that pass it towards the socket.
    final class ReadCounter: ChannelOutboundHandler, @unchecked Sendable {
        typealias OutboundIn = NIOAny
        var count = 0
        func read(context: ChannelHandlerContext) {
            count += 1
            context.read()
        }
    }

    @Test("Input that ends during a round trip: the answer comes first (a 304 here, or the request to the decoder), then the event")
    func inputEndsDuringRoundTrip() throws {
        let asked = Self.get(ToldVerdicts.asked)
        for current in [true, false] {
            let verdicts = ToldVerdicts()
            let channel = try channel(verdicts)
            let events = EventRecorder()
            try channel.pipeline.syncOperations.addHandler(events)
            try channel.writeInbound(ByteBuffer(string: asked))
            channel.pipeline.fireUserInboundEventTriggered(ChannelEvent.inputClosed)
            #expect(events.seen.isEmpty, "the question's request and the event wait for the answer")
            verdicts.answer(current ? (ToldVerdicts.asked, .empty) : nil)
            channel.embeddedEventLoop.run()
            if current {
                #expect(try written(channel) == ["HTTP/1.1 304 Not Modified"])
                #expect(events.seen == ["inputClosed"])
            } else {
                #expect(try written(channel).isEmpty)
                #expect(events.seen == ["read \(asked.utf8.count)", "inputClosed"], "changed: the request goes to the router, then the event")
            }
            _ = try channel.finish(acceptAlreadyClosed: true)
        }
    }

    /// Records the reads and events that pass it.
    final class EventRecorder: ChannelInboundHandler, @unchecked Sendable {
        typealias InboundIn = ByteBuffer
        var seen: [String] = []
        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            seen.append("read \(unwrapInboundIn(data).readableBytes)")
        }
        func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
            if case ChannelEvent.inputClosed = event { seen.append("inputClosed") }
        }
    }
}

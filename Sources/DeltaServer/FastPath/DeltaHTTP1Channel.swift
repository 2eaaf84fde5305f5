import DeltaEventLoops
import DeltaStore
import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import NIOHTTPTypesHTTP1
import ServiceLifecycle

/// Hummingbird's HTTP/1 child channel with `NotModifiedBeforeDecoding` in front of its decoder,
/// and `BlobFileBody`, `ResponseEnds` and `HTTPVersionCheck` behind it; its requests run on its
/// event loop when the store never blocks.
///
/// Hummingbird's side of a connection (its task's deep stack, its request loop) starts only when
/// the raw path first hands the decoder bytes: a connection that only revalidates or waits
/// (`WaitingRoom`) is answered from the raw path alone and costs a few kilobytes less
/// (docs/OPERATIONS.md, "Live clients").
struct DeltaHTTP1Channel: ServerChildChannel {
    /// A connection: Hummingbird's, and the moment its side is needed.
    struct Value: ServerChildChannelValue {
        let http1: HTTP1Channel.Value
        /// Succeeds when the decoder first gets bytes, or the connection ends.
        let decoderNeeded: EventLoopFuture<Void>

        var channel: any Channel { http1.channel }
    }

    /// The channel Hummingbird would use on its own.
    let http1: HTTP1Channel
    let verdicts: (any EarlyVerdicts)?
    let users: UserVerdicts?
    let metrics: ServerMetrics
    let answers: AnswerCache
    /// Where live clients' requests wait, and the longest wait (`NotModifiedBeforeDecoding+Waiting`).
    let longPoll: LongPoll
    let maximumWait: Int
    /// How long a connection may stay idle (`ConnectionIdleness`; nil: for ever).
    let idleTimeout: TimeAmount?
    /// Whether the connection's requests run on its event loop (`ChangeStore.runsOnEventLoops`).
    let onEventLoops: Bool

    /// How a connection's reads are sized.
    static let reads = AdaptiveRecvByteBufferAllocator(minimum: 64, initial: 1024, maximum: 65536)

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        let decoderNeeded = channel.eventLoop.makePromise(of: Void.self)
        let idleness = idleTimeout.map(ConnectionIdleness.init)
        let bound = NIOLoopBound(idleness, eventLoop: channel.eventLoop)
        do {
            // Each connection keeps its last read's buffer for the next read: sized for a
            // request's header block at first (NIO's default is 2 KiB), it grows when reads fill it.
            try channel.syncOptions?.setOption(ChannelOptions.recvAllocator, value: Self.reads)
            try channel.pipeline.syncOperations.addHandler(
                NotModifiedBeforeDecoding(
                    verdicts: verdicts, users: users, metrics: metrics, answers: answers, longPoll: longPoll, maximumWait: maximumWait,
                    decoderNeeded: decoderNeeded, idleness: idleness))
        } catch {
            decoderNeeded.succeed()
            return channel.eventLoop.makeFailedFuture(error)
        }
        return http1.setup(channel: channel, logger: logger).flatMapThrowing { [idleness = bound] value in
            // Between NIO's HTTP/1 messages and the HTTP types codec: it writes file regions.
            let codec = try channel.pipeline.syncOperations.handler(type: HTTP1ToHTTPServerCodec.self)
            try channel.pipeline.syncOperations.addHandler(BlobFileBody(), position: .before(codec))
            // Behind it: a response has ended once its file region is written too.
            try channel.pipeline.syncOperations.addHandler(ResponseEnds(), position: .before(codec))
            // The codec drops the request's version: an HTTP/1.0 request is refused before it.
            try channel.pipeline.syncOperations.addHandler(HTTPVersionCheck(), position: .before(codec))
            // Behind the codec, where requests and answers are whole: the idle timeout (Hummingbird's is off).
            if let idleness = idleness.value { try channel.pipeline.syncOperations.addHandler(idleness, position: .after(codec)) }
            return Value(http1: value, decoderNeeded: decoderNeeded.futureResult)
        }
    }

    func handle(value: Value, logger: Logger) async {
        // Until the raw path needs the decoder: a shutdown closes the connection (as Hummingbird
        // closes an idle one), which ends the wait too.
        let channel = value.channel
        await withGracefulShutdownHandler {
            await withTaskCancellationHandler {
                try? await value.decoderNeeded.get()
            } onCancel: {
                channel.close(promise: nil)
            }
        } onGracefulShutdown: {
            channel.close(promise: nil)
        }
        if onEventLoops, #available(macOS 15.0, *) {
            await withTaskExecutorPreference(EventLoopExecutor(value.channel.eventLoop)) {
                await http1.handle(value: value.http1, logger: logger)
            }
        } else {
            await http1.handle(value: value.http1, logger: logger)
        }
    }
}

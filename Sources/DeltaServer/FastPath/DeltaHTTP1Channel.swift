import DeltaStore
import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import NIOHTTPTypesHTTP1

/// Hummingbird's HTTP/1 child channel with `NotModifiedBeforeDecoding` in front of its decoder,
/// and `BlobFileBody`, `ResponseEnds` and `HTTPVersionCheck` behind it; its requests run on its
/// event loop when the store never blocks.
struct DeltaHTTP1Channel: ServerChildChannel {
    typealias Value = HTTP1Channel.Value

    /// The channel Hummingbird would use on its own.
    let http1: HTTP1Channel
    let verdicts: (any EarlyVerdicts)?
    let users: UserVerdicts?
    let metrics: ServerMetrics
    let answers: AnswerCache
    /// Where live clients' requests wait, and the longest wait (`NotModifiedBeforeDecoding+Waiting`).
    let longPoll: LongPoll
    let maximumWait: Int
    /// Whether the connection's requests run on its event loop (`ChangeStore.runsOnEventLoops`).
    let onEventLoops: Bool

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        do {
            try channel.pipeline.syncOperations.addHandler(
                NotModifiedBeforeDecoding(
                    verdicts: verdicts, users: users, metrics: metrics, answers: answers, longPoll: longPoll, maximumWait: maximumWait))
        } catch {
            return channel.eventLoop.makeFailedFuture(error)
        }
        return http1.setup(channel: channel, logger: logger).flatMapThrowing { value in
            // Between NIO's HTTP/1 messages and the HTTP types codec: it writes file regions.
            let codec = try channel.pipeline.syncOperations.handler(type: HTTP1ToHTTPServerCodec.self)
            try channel.pipeline.syncOperations.addHandler(BlobFileBody(), position: .before(codec))
            // Behind it: a response has ended once its file region is written too.
            try channel.pipeline.syncOperations.addHandler(ResponseEnds(), position: .before(codec))
            // The codec drops the request's version: an HTTP/1.0 request is refused before it.
            try channel.pipeline.syncOperations.addHandler(HTTPVersionCheck(), position: .before(codec))
            return value
        }
    }

    func handle(value: Value, logger: Logger) async {
        if onEventLoops, #available(macOS 15.0, *) {
            await withTaskExecutorPreference(EventLoopExecutor(value.channel.eventLoop)) {
                await http1.handle(value: value, logger: logger)
            }
        } else {
            await http1.handle(value: value, logger: logger)
        }
    }
}

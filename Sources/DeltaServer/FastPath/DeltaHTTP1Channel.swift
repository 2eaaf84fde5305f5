import DeltaStore
import Hummingbird
import HummingbirdCore
import Logging
import NIOCore

/// Hummingbird's HTTP/1 child channel with `NotModifiedBeforeDecoding` in front of its decoder.
struct DeltaHTTP1Channel: ServerChildChannel {
    typealias Value = HTTP1Channel.Value

    /// The channel Hummingbird would use on its own.
    let http1: HTTP1Channel
    let verdicts: (any EarlyVerdicts)?
    let users: UserVerdicts?
    let metrics: ServerMetrics
    let answers: AnswerCache

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        do {
            try channel.pipeline.syncOperations.addHandler(NotModifiedBeforeDecoding(verdicts: verdicts, users: users, metrics: metrics, answers: answers))
        } catch {
            return channel.eventLoop.makeFailedFuture(error)
        }
        return http1.setup(channel: channel, logger: logger)
    }

    func handle(value: Value, logger: Logger) async {
        await http1.handle(value: value, logger: logger)
    }
}

import DeltaCore
import DeltaSQLite
import Foundation

/// Where one blob's upload or download stands: what `Replica.blobTransfers()` reports.
public struct BlobTransfer: Sendable, Equatable {
    /// Which way the bytes go.
    public enum Direction: Sendable, Equatable {
        /// To the server, before the write that references the blob is pushed.
        case upload
        /// From the server, into the replica.
        case download
    }

    /// The blob.
    public let hash: BlobHash
    /// Which way.
    public let direction: Direction
    /// Bytes transferred so far, counting those a resumed download already had.
    public let bytes: Int64
    /// The blob's size.
    public let total: Int64
    /// Whether the transfer ended well: the server holds the blob, or the replica holds it checked.
    /// A transfer that fails just stops reporting; the error goes to the call that started it.
    public let isFinished: Bool

    /// Creates a report.
    public init(hash: BlobHash, direction: Direction, bytes: Int64, total: Int64, isFinished: Bool) {
        self.hash = hash
        self.direction = direction
        self.bytes = bytes
        self.total = total
        self.isFinished = isFinished
    }

    /// `bytes / total`, from 0 to 1 (1 for a blob of no bytes).
    public var fraction: Double { total == 0 ? 1 : min(1, Double(bytes) / Double(total)) }
}

/// The subscribers to a replica's blob transfers, and how often each transfer reports.
final class TransferFeed: Sendable {
    private let subscribers = Locked<[UUID: AsyncStream<BlobTransfer>.Continuation]>([:])
    private let reported = Locked<[BlobHash: (bytes: Int64, at: ContinuousClock.Instant)]>([:])

    /// A new subscription, for as long as it is iterated; it keeps the newest 256 reports.
    func subscribe() -> AsyncStream<BlobTransfer> {
        let (stream, continuation) = AsyncStream.makeStream(of: BlobTransfer.self, bufferingPolicy: .bufferingNewest(256))
        let id = UUID()
        subscribers.withLock { $0[id] = continuation }
        continuation.onTermination = { [subscribers] _ in _ = subscribers.withLock { $0.removeValue(forKey: id) } }
        return stream
    }

    /// Reports `transfer`: its start, its end, and in between at most every 256 KiB and 50 ms.
    func publish(_ transfer: BlobTransfer) {
        let now = ContinuousClock.now
        let due = reported.withLock { reported in
            let last = reported[transfer.hash]
            let isEdge = transfer.isFinished || last == nil
            guard isEdge || (transfer.bytes - last!.bytes >= 1 << 18 && now - last!.at >= .milliseconds(50)) else { return false }
            if transfer.isFinished { reported[transfer.hash] = nil } else { reported[transfer.hash] = (transfer.bytes, now) }
            return true
        }
        guard due else { return }
        for subscriber in subscribers.withLock({ Array($0.values) }) { subscriber.yield(transfer) }
    }

    /// Forgets a transfer that failed, so that its next attempt reports its start again.
    func end(_ hash: BlobHash) { _ = reported.withLock { $0.removeValue(forKey: hash) } }
}

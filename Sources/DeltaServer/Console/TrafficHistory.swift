import Foundation
import NIOConcurrencyHelpers

/// The last hour of this server's requests, in memory, for the console's overview: per 10
/// seconds, how many were answered, how many of them `304`, and a histogram of how long the
/// server took (from a decoded request to its handler's answer; a long-poll's wait is not
/// latency, so `?wait=` requests are counted but not timed). Answers made from a connection's raw
/// bytes, before decoding (`NotModifiedBeforeDecoding`), are counted in the lowest bin: they are
/// written in the read that brought their request. Fixed size (about 60 KB); one short lock per request.
public final class TrafficHistory: Sendable {
    /// Seconds per slot, and slots kept (an hour).
    static let slotSeconds = 10, slots = 360
    /// The latency bins' upper bounds, in microseconds (the last also holds anything longer).
    static let bounds: [Int] = [
        100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000, 1_000_000, 2_500_000, 5_000_000, 10_000_000, 60_000_000,
    ]

    private struct Slot {
        var epoch: Int
        var requests = 0
        var notModified = 0
        var bins = [Int](repeating: 0, count: TrafficHistory.bounds.count)

        init(epoch: Int = -1) { self.epoch = epoch }
    }

    private let ring = NIOLockedValueBox([Slot](repeating: Slot(), count: TrafficHistory.slots))
    private let now: @Sendable () -> Date

    /// Creates an empty history; `now` is the clock (tests give their own).
    public init(now: @escaping @Sendable () -> Date = { Date() }) {
        self.now = now
    }

    /// Counts one answer with its status; `microseconds` nil counts it untimed (a long-poll), 0 in the lowest bin.
    func record(status: Int, microseconds: Int?) {
        let epoch = Int(now().timeIntervalSince1970) / Self.slotSeconds
        let bin = microseconds.map { time in Self.bounds.firstIndex { time <= $0 } ?? Self.bounds.count - 1 }
        ring.withLockedValue { ring in
            let index = epoch % Self.slots
            if ring[index].epoch != epoch { ring[index] = Slot(epoch: epoch) }
            ring[index].requests += 1
            if status == 304 { ring[index].notModified += 1 }
            if let bin { ring[index].bins[bin] += 1 }
        }
    }

    /// One minute of traffic, or a longer span's.
    struct Summary: Sendable, Equatable {
        /// When the span starts.
        let start: Date
        /// Answers, and how many of them were `304`.
        let requests: Int, notModified: Int
        /// Answers per second over the span.
        let perSecond: Double
        /// The latency under which half, and 99 in 100, of the timed answers were made, in
        /// milliseconds (the upper bound of their bin); nil when none was timed.
        let p50: Double?, p99: Double?
    }

    /// The last `minutes` minutes, oldest first (the current one, partial, last), and their total.
    func summary(minutes: Int = 60) -> (minutes: [Summary], total: Summary) {
        let current = Int(now().timeIntervalSince1970) / Self.slotSeconds
        let perMinute = 60 / Self.slotSeconds
        let last = current - current % perMinute + perMinute - 1  // the current minute's last slot
        let first = last - minutes * perMinute + 1
        let slots = ring.withLockedValue { ring in ring.filter { $0.epoch >= first && $0.epoch <= last } }
        var result: [Summary] = []
        for minute in 0..<minutes {
            let from = first + minute * perMinute
            result.append(Self.summary(slots.filter { $0.epoch >= from && $0.epoch < from + perMinute }, start: from, seconds: 60))
        }
        let elapsed = min(minutes * 60, (current - first + 1) * Self.slotSeconds)
        return (result, Self.summary(slots, start: first, seconds: elapsed))
    }

    private static func summary(_ slots: [Slot], start: Int, seconds: Int) -> Summary {
        var bins = [Int](repeating: 0, count: bounds.count)
        for slot in slots { for index in bins.indices { bins[index] += slot.bins[index] } }
        let requests = slots.reduce(0) { $0 + $1.requests }
        return Summary(
            start: Date(timeIntervalSince1970: TimeInterval(start * slotSeconds)), requests: requests,
            notModified: slots.reduce(0) { $0 + $1.notModified }, perSecond: Double(requests) / Double(max(1, seconds)),
            p50: percentile(bins, 0.5), p99: percentile(bins, 0.99))
    }

    /// The upper bound, in milliseconds, of the bin where the `fraction` rank falls.
    private static func percentile(_ bins: [Int], _ fraction: Double) -> Double? {
        let total = bins.reduce(0, +)
        guard total > 0 else { return nil }
        let rank = Int((Double(total) * fraction).rounded(.up))
        var seen = 0
        for (index, count) in bins.enumerated() {
            seen += count
            if seen >= rank { return Double(bounds[index]) / 1_000 }
        }
        return nil
    }
}

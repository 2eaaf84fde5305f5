import Foundation
import HTTPTypes
import NIOConcurrencyHelpers
import NIOCore

/// The origin's own cache of cacheable reads (`CacheableRead`): their answers never change, so
/// the bytes sent once are sent again to the next client at the same token, without a database
/// read. Bounded in bytes; an answer larger than `maximumEntryBytes` is never kept; the oldest
/// entries go first (clients converge on the newest `until`, so the newest answers are the hot ones).
final class AnswerCache: Sendable {
    /// One kept answer: the headers and the encoded body of a `200`.
    struct Entry: Sendable {
        let headers: HTTPFields
        let body: ByteBuffer
        /// The response as bytes up to its `Date` field (status line, `headers`, `Content-Length`),
        /// for `NotModifiedBeforeDecoding`, which sends kept answers before the HTTP decoder.
        let head: ByteBuffer
        /// When the answer stops being sent, in seconds since 1970 (a read grant's expiry); nil: never.
        let expires: UInt64?

        init(headers: HTTPFields, body: ByteBuffer, expires: UInt64? = nil) {
            self.headers = headers
            self.body = body
            self.expires = expires
            head = ByteBuffer(string: "HTTP/1.1 200 OK\r\n" + headers.http1Lines + "Content-Length: \(body.readableBytes)\r\n")
        }
    }

    /// The key of a cacheable read: its target after `/api/` in the canonical parameter order
    /// (`CacheableRead.query`), and whether the answer is gzip-encoded.
    static func key(target: String, gzip: Bool) -> String { gzip ? target + "#gzip" : target }

    private struct State {
        var entries: [String: Entry] = [:]
        var order: [String] = []
        var first = 0
        var bytes = 0
    }

    /// The most bytes of bodies kept. 0 turns the cache off.
    let maximumBytes: Int
    /// The largest body kept.
    let maximumEntryBytes: Int
    private let state = NIOLockedValueBox(State())

    /// A cache of at most `maximumBytes`, each answer at most `maximumEntryBytes` (default: an eighth).
    init(maximumBytes: Int, maximumEntryBytes: Int? = nil) {
        self.maximumBytes = max(0, maximumBytes)
        self.maximumEntryBytes = min(self.maximumBytes, maximumEntryBytes ?? self.maximumBytes / 8)
    }

    /// The kept answer for `key`, if any and not expired.
    func entry(_ key: String) -> Entry? {
        guard maximumBytes > 0, let entry = state.withLockedValue({ $0.entries[key] }) else { return nil }
        if let expires = entry.expires, UInt64(Date().timeIntervalSince1970) >= expires { return nil }
        return entry
    }

    /// Keeps `entry` under `key`, evicting the oldest entries until it fits.
    func keep(_ key: String, _ entry: Entry) {
        let size = entry.body.readableBytes
        guard size <= maximumEntryBytes else { return }
        state.withLockedValue { state in
            guard state.entries[key] == nil else { return }
            while state.bytes + size > maximumBytes, state.first < state.order.count {
                let oldest = state.order[state.first]
                state.first += 1
                state.bytes -= state.entries.removeValue(forKey: oldest)?.body.readableBytes ?? 0
            }
            if state.first > 1_024, state.first * 2 > state.order.count {
                state.order.removeFirst(state.first)
                state.first = 0
            }
            state.entries[key] = entry
            state.order.append(key)
            state.bytes += size
        }
    }

    /// Forgets every kept answer: the rules changed (`LiveRules`), and an answer kept under the
    /// old ones may no longer be anyone's to read.
    func removeAll() {
        state.withLockedValue { $0 = State() }
    }

    /// How many answers and bytes are kept (for tests and `/metrics`).
    var usage: (entries: Int, bytes: Int) { state.withLockedValue { ($0.entries.count, $0.bytes) } }
}

/// Collects the bytes of one streamed answer for `AnswerCache`, giving up past `limit`.
final class AnswerRecorder: Sendable {
    private let bytes = NIOLockedValueBox<[UInt8]?>([])
    private let limit: Int

    init(limit: Int) { self.limit = limit }

    /// Adds the next bytes sent.
    func append(_ chunk: some Collection<UInt8>) {
        bytes.withLockedValue { kept in
            guard kept != nil else { return }
            if kept!.count + chunk.count > limit { kept = nil } else { kept!.append(contentsOf: chunk) }
        }
    }

    /// Everything sent, or nil when it grew past the limit.
    var recorded: [UInt8]? { bytes.withLockedValue { $0 } }

    /// Whether it grew past the limit (and keeps nothing).
    var gaveUp: Bool { bytes.withLockedValue { $0 == nil } }
}

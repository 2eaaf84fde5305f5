import DeltaCore
import Foundation
import HTTPTypes
import NIOConcurrencyHelpers
import NIOCore

/// The origin's own cache of answers that are the same bytes for everyone who asks: cacheable
/// reads (`CacheableRead`), and the plain reads of a public collection's whole dataset
/// (`ReadRoute+PublicAnswers`). An answer from one token to another never changes, so the bytes
/// sent once are sent again to the next client at the same token, without a database read.
/// Bounded in bytes; an answer larger than `maximumEntryBytes` is never kept; the oldest entries
/// go first (clients converge on the newest `until`, so the newest answers are the hot ones).
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

        /// The start a plain read asks from (`startKey`), when it is kept for plain reads too.
        fileprivate(set) var start: String?
        /// The version of the rules it was computed under (nil: a server without rules).
        fileprivate(set) var rules: UInt64?

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

    /// The key of where a plain read of a whole collection starts: the collection and the token it
    /// sent (`since`), without the end it is answered at, which only its read finds.
    static func startKey(collection: CollectionName, since: Token?, gzip: Bool) -> String {
        key(target: "\(collection.rawValue)?since=\(since?.urlValue ?? "")", gzip: gzip)
    }

    private struct State {
        var entries: [String: Entry] = [:]
        var order: [String] = []
        var first = 0
        var bytes = 0
        /// For each start of a plain read (`startKey`), the key of its newest kept answer.
        var newest: [String: String] = [:]
    }

    /// The most bytes of bodies kept. 0 turns the cache off.
    let maximumBytes: Int
    /// The largest body kept.
    let maximumEntryBytes: Int
    private let state = NIOLockedValueBox(State())
    /// The rules the server follows as they change (nil: fixed rules, or none): an answer is
    /// kept and sent only under the version it was computed under.
    private let rules: LiveRules?

    /// A cache of at most `maximumBytes`, each answer at most `maximumEntryBytes` (default: an
    /// eighth), of answers computed under the version of `rules` held when each is sent.
    init(maximumBytes: Int, maximumEntryBytes: Int? = nil, rules: LiveRules? = nil) {
        self.maximumBytes = max(0, maximumBytes)
        self.maximumEntryBytes = min(self.maximumBytes, maximumEntryBytes ?? self.maximumBytes / 8)
        self.rules = rules
    }

    /// The kept answer for `key`, if any, not expired, and computed under the rules held now.
    func entry(_ key: String) -> Entry? {
        guard maximumBytes > 0, let entry = state.withLockedValue({ $0.entries[key] }) else { return nil }
        if let expires = entry.expires, UInt64(Date().timeIntervalSince1970) >= expires { return nil }
        // Between a change of the rules and `removeAll`, answers of the old ones are still here.
        if let rules, entry.rules != rules.version { return nil }
        return entry
    }

    /// Whether an answer from the plain read's start `start` (`startKey`) is kept: only then is it
    /// worth asking where the read would end before reading it, to send the kept answer instead.
    func keepsAnswers(from start: String) -> Bool {
        maximumBytes > 0 && state.withLockedValue { $0.newest[start] != nil }
    }

    /// Keeps `entry`, computed under the rules of version `rules` (nil: none), under `key`,
    /// evicting the oldest entries until it fits; with `start`, as the newest answer from that
    /// plain read's start too (`keepsAnswers(from:)`). An answer computed under rules that are
    /// no longer held is not kept: `removeAll` may have run already.
    func keep(_ key: String, _ entry: Entry, rules version: UInt64?, start: String? = nil) {
        let size = entry.body.readableBytes
        guard size <= maximumEntryBytes else { return }
        var entry = entry
        entry.start = start
        entry.rules = version
        state.withLockedValue { state in
            // Under the cache's lock: `removeAll` runs after the version changed, so an answer of
            // the old rules is either refused here or removed there.
            if let rules, rules.version != version { return }
            if state.entries[key] != nil {
                // Kept already (by a cacheable read of the same ends): now found from its start too.
                if let start, state.entries[key]?.start == nil {
                    state.entries[key]?.start = start
                    state.newest[start] = key
                }
                return
            }
            while state.bytes + size > maximumBytes, state.first < state.order.count {
                let oldest = state.order[state.first]
                state.first += 1
                guard let removed = state.entries.removeValue(forKey: oldest) else { continue }
                state.bytes -= removed.body.readableBytes
                if let start = removed.start, state.newest[start] == oldest { state.newest[start] = nil }
            }
            if state.first > 1_024, state.first * 2 > state.order.count {
                state.order.removeFirst(state.first)
                state.first = 0
            }
            state.entries[key] = entry
            state.order.append(key)
            state.bytes += size
            if let start { state.newest[start] = key }
        }
    }

    /// Forgets that an answer from the plain read's start `start` is kept: one from it was computed
    /// and not kept (too large), so its newest kept answer ends before every later read from it,
    /// and asking where that read ends first would only add a question to each of them.
    func forget(start: String) {
        state.withLockedValue { _ = $0.newest.removeValue(forKey: start) }
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

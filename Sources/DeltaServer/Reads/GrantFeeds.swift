import DeltaCore
import DeltaStore
import HTTPTypes
import Hummingbird
import NIOCore

/// A user's read answered with a `307` to its granted cacheable read: no records, the user's
/// own token and digest for the `307`'s headers, where the answer is, and the `Delta-Base` that
/// answer carries when it is a delta (the user's token without its user).
final class GrantedFeed: ChangeFeed {
    let location: String
    let token: Token
    let digest: StateDigest
    let mode: FeedMode
    let base: String?

    init(location: String, token: Token, digest: StateDigest, mode: FeedMode, base: String?) {
        (self.location, self.token, self.digest, self.mode, self.base) = (location, token, digest, mode, base)
    }

    func next(maximumBytes: Int) async throws -> RecordBatch? { nil }
    func close() {}
}

/// A selection's feed whose answer is named by an earlier token than the read's own: the token of
/// the newest commit that changed what the grant's answer depends on (nothing it reads changed after).
final class GrantAnswerFeed: ChangeFeed {
    private let feed: any ChangeFeed
    let token: Token

    init(_ feed: any ChangeFeed, token: Token) {
        self.feed = feed
        self.token = token
    }

    var digest: StateDigest { feed.digest }
    var mode: FeedMode { feed.mode }
    func next(maximumBytes: Int) async throws -> RecordBatch? { try await feed.next(maximumBytes: maximumBytes) }
    func close() { feed.close() }
}

/// Drives an answer's body for `AnswerCache` alone: the bytes go to the recorder, and writing
/// stops as soon as the recorder gives up (the answer is too large to keep).
struct KeepingWriter: ResponseBodyWriter {
    let recorder: AnswerRecorder

    struct TooLarge: Error {}

    mutating func write(_ buffer: ByteBuffer) async throws {
        if recorder.gaveUp { throw TooLarge() }
    }

    mutating func write(contentsOf buffers: some Sequence<ByteBuffer>) async throws {
        if recorder.gaveUp { throw TooLarge() }
    }

    consuming func finish(_ trailingHeaders: HTTPFields?) async throws {}
}

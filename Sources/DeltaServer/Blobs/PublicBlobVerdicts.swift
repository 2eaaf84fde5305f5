import DeltaCore
import DeltaStore
import NIOConcurrencyHelpers

/// The public verdicts (`BlobAccess.Verdict.everyone`) this instance found in the last second,
/// kept beside `--blob-cache`, so that a popular public blob sent from the cache costs no query
/// either. Only "anyone may read it" is kept, never a refusal or a user's verdict, and for one
/// second: a blob whose last public referrer was just hidden may be sent by this instance for
/// that second more, where its `Cache-Control: public, max-age=31536000, immutable` already lets
/// every cache on the way keep it for a year.
final class PublicBlobVerdicts: Sendable {
    /// How long a verdict is kept.
    static let lifetime = Duration.seconds(1)
    /// The most verdicts kept; past it, all go (at most one second's worth is lost).
    static let capacity = 10_000

    private let verdicts = NIOLockedValueBox<[BlobHash: (blob: StoredBlob, until: ContinuousClock.Instant)]>([:])

    /// The blob, when a public verdict on it is less than `lifetime` old.
    func blob(_ hash: BlobHash) -> StoredBlob? {
        verdicts.withLockedValue { verdicts in
            guard let kept = verdicts[hash] else { return nil }
            guard kept.until > .now else {
                verdicts[hash] = nil
                return nil
            }
            return kept.blob
        }
    }

    /// Keeps a public verdict on `blob` for `lifetime`.
    func remember(_ blob: StoredBlob) {
        verdicts.withLockedValue { verdicts in
            if verdicts.count >= Self.capacity { verdicts.removeAll(keepingCapacity: true) }
            verdicts[blob.hash] = (blob, .now + Self.lifetime)
        }
    }
}

import DeltaCore
import DeltaRules
import DeltaStore
import Hummingbird

/// Who may read a blob (docs/PROTOCOL.md, "Files"): the owner always; anyone when a visible row
/// of a public collection references it (every collection is public without `--rules`); a user
/// when a visible row their read rule gives them references it. Anyone else is answered `404`,
/// exactly as for a blob that does not exist: whether a blob exists is not told. With
/// `--blob-cache`, a public verdict is kept for a second (`PublicBlobVerdicts`).
struct BlobAccess: Sendable {
    let store: any ChangeReader & BlobStore
    let configuration: ServerConfiguration

    /// How many referencing rows a user's read looks at, at most: a blob referenced by more
    /// restricted rows than this, none of them the user's among the first, is not theirs to read.
    static let referrersExamined = 1_000

    /// What a reader may do with a blob.
    enum Verdict: Equatable {
        /// Anyone may read it: shared caches may keep it (`public, immutable`).
        case everyone
        /// This reader may, others perhaps not: `private`.
        case reader
        /// Not this reader: `404`.
        case nobody
    }

    /// The verdict for `request` on `hash`, with the blob when the check already read it (the
    /// public check, the owner's); `401` for a credential that does not verify.
    func verdict(_ caller: Caller, _ hash: BlobHash) async throws -> (Verdict, StoredBlob?) {
        let credential = try await caller.credential(reading: "blob \(hash)")
        let policy = configuration.readPolicy
        let publicCollections = policy.publicCollections
        if let blob = configuration.blobCache?.publicVerdicts.blob(hash) { return (.everyone, blob) }
        if publicCollections.map({ !$0.isEmpty }) ?? true, let blob = try await store.referencedBlob(hash, in: publicCollections) {
            configuration.blobCache?.publicVerdicts.remember(blob)
            return (.everyone, blob)
        }
        switch credential {
        case .owner?:
            let blob = try await store.blob(hash)
            return (blob == nil ? .nobody : .reader, blob)
        case .user(let claims)?: return (try await readable(hash, by: claims, policy) ? .reader : .nobody, nil)
        default: return (.nobody, nil)
        }
    }

    /// Whether a visible row that references `hash` is one `claims`' read rule gives them.
    private func readable(_ hash: BlobHash, by claims: Claims, _ policy: ReadPolicy) async throws -> Bool {
        guard let stored = configuration.rules else { return false }
        let referrers = try await store.referrers(of: hash, in: nil, limit: Self.referrersExamined)
        var byCollection: [CollectionName: [Record]] = [:]
        for referrer in referrers { byCollection[referrer.collection, default: []].append(referrer.record) }
        for (collection, records) in byCollection {
            guard case .rule(let filter, _)? = try? policy.userScope(of: collection, for: claims) else { continue }
            let (start, _) = try await store.openRuleRead(collection, since: .nothing, client: nil)
            guard case .source(let source, _) = start else { continue }
            defer { source.close() }
            try stored.check(source)
            let matcher = FilterMatcher(try await source.resolve(filter, for: claims))
            if records.contains(where: { matcher.matches(body: $0.body) }) { return true }
        }
        return false
    }
}

import DeltaCore
import Foundation
import NIOConcurrencyHelpers

/// The latest mutations this server's pushes refused (`conflict`, `denied`, `invalid`), in
/// memory, for the console's Activity page. Applied mutations are in the database's log, where
/// every instance sees them; refused ones change nothing in the database, so each instance keeps
/// its own, the newest `capacity`.
final class PushRefusals: Sendable {
    /// How many are kept.
    static let capacity = 1_000

    /// One refused mutation.
    struct Entry: Sendable, Equatable {
        let time: Date
        let collection: String, id: String
        /// The pushing user's `sub`; nil for an app's client key or the owner.
        let user: String?
        let client: String, mutation: UInt64
        let operation: String
        /// `conflict`, `denied` or `invalid`, and its reason or rule.
        let status: String, reason: String?
    }

    private let entries = NIOLockedValueBox<[Entry]>([])

    /// Notes the refused results of one push.
    func record(_ push: PushRequest, _ results: [MutationResult], user: String?) {
        let mutations = Dictionary(push.mutations.map { ($0.id, $0) }, uniquingKeysWith: { $1 })
        let now = Date()
        let refused = results.compactMap { result -> Entry? in
            guard result.status == .conflict || result.status == .denied || result.status == .invalid, let mutation = mutations[result.id] else {
                return nil
            }
            return Entry(
                time: now, collection: mutation.collection.rawValue, id: mutation.recordID, user: user, client: push.client, mutation: result.id,
                operation: mutation.operation.rawValue, status: result.status.rawValue, reason: result.reason ?? result.rule.map { "rule \($0)" })
        }
        guard !refused.isEmpty else { return }
        entries.withLockedValue { entries in
            entries.append(contentsOf: refused)
            if entries.count > Self.capacity { entries.removeFirst(entries.count - Self.capacity) }
        }
    }

    /// The kept entries, newest first, that `matches` keeps.
    func newest(where matches: (Entry) -> Bool) -> [Entry] {
        entries.withLockedValue { $0.reversed().filter(matches) }
    }
}

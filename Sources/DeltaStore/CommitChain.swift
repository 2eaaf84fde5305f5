import DeltaCore
import Foundation

/// The rules every backend commits by: the next position, and the commit's tag, which chains
/// from its predecessor's tag through a hash of the commit's changes.
///
/// A chain, not a random number: a database restored from a backup that then takes different
/// writes gets different tags from the history it lost (its tokens are refused), while the same
/// writes replayed on the same identity give the same tags, and the same snapshot bytes, on
/// either backend.
package struct CommitChain: Sendable {
    private var changes = SHA256()

    /// An empty commit.
    package init() {}

    /// Adds one change, in the order the commit makes them. A hide-in-place passes an empty body.
    package mutating func add(collection: CollectionName, id: String, hidden: Bool, body: [UInt8]) {
        changes.update(Array(collection.rawValue.utf8) + [0] + Array(id.utf8) + [0, hidden ? 1 : 0, 0])
        changes.update(body)
        changes.update([0x0A])
    }

    /// The tag of this commit at `position` after `previous`: the first 32 bits of
    /// SHA-256(previous tag, position, SHA-256 of the changes), never 0.
    package func tag(previous: UInt32, position: UInt64) -> UInt32 {
        Self.tag(previous: previous, position: position, changes: changes.finalize())
    }

    /// The tag rule itself.
    package static func tag(previous: UInt32, position: UInt64, changes: [UInt8]) -> UInt32 {
        var input: [UInt8] = []
        for shift in stride(from: 24, through: 0, by: -8) { input.append(UInt8(truncatingIfNeeded: previous >> UInt32(shift))) }
        for shift in stride(from: 56, through: 0, by: -8) { input.append(UInt8(truncatingIfNeeded: position >> UInt64(shift))) }
        let digest = SHA256.hash(input + changes)
        let tag = UInt32(digest[0]) << 24 | UInt32(digest[1]) << 16 | UInt32(digest[2]) << 8 | UInt32(digest[3])
        return tag == 0 ? 1 : tag
    }

    /// The position after `head`, refused when it would pass the clock: `Last-Modified` shows
    /// the position as a date, which must never be in the future.
    package static func nextPosition(after head: UInt64) throws -> UInt64 {
        let next = head + 1
        let now = UInt64(Date().timeIntervalSince1970)
        guard next <= now else {
            throw StoreError(.invalidWrite, "commit", "the commit counter would pass the current time", evidence: "position \(next), clock \(now)")
        }
        return next
    }
}

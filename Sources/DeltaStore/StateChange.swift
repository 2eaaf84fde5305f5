import DeltaCore
import Foundation

/// What one commit does to a collection's visible state: to its state digest, and to how many
/// visible records it has. Both backends keep the two in one row per collection (`digests`),
/// changed in the same transaction as the records.
package struct StateChange: Sendable {
    /// The sum of the versions made visible, minus those no longer visible.
    package private(set) var digest = StateDigest.empty
    /// Visible records gained (negative: lost).
    package private(set) var records = 0

    /// No change.
    package init() {}

    /// A version became visible.
    package mutating func add(body: some ContiguousBytes) {
        digest.add(body: body)
        records += 1
    }

    /// A visible version was hidden or replaced.
    package mutating func remove(body: some ContiguousBytes) {
        digest.remove(body: body)
        records -= 1
    }

    /// Another commit's change after this one's (a group of commits, `PostgresWriteGroup`).
    package mutating func add(_ other: StateChange) {
        digest.add(other.digest)
        records += other.records
    }

    /// A visible version was hidden or replaced, known by its contribution (`StateDigest.element`).
    package mutating func remove(element: StateDigest) {
        digest.subtract(element)
        records -= 1
    }
}

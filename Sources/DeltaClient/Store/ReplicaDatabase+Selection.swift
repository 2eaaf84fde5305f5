import DeltaCore
import DeltaSQLite
import Foundation

/// Which subset of each collection the local store holds (docs/PROTOCOL.md, "Selections").
///
/// The selection a collection was installed for is stored beside its data (`sync_state`,
/// `selection:<name>`), so that opening with another one resets that collection alone. A bundled
/// snapshot fits a selection when its token was issued to it (`bake --filter --limit`); one that
/// does not fit is installed cut down to the selection (filter and limit applied locally, so the
/// app starts offline with the right subset of the bundled data) but without its token: the
/// first sync then downloads the selection in full instead of a delta the server cannot compute.
extension ReplicaDatabase {
    /// What is stored for `selection`: empty for the whole collection, else its fingerprint.
    static func storedForm(_ selection: Selection) -> String { selection.isEverything ? "" : selection.fingerprint }

    /// Whether a snapshot entry with `entityTag` was baked for exactly `selection`: a token of the
    /// whole collection, or one marked with the selection's fingerprint. A token `bake --as-claims`
    /// issued to a user carries a selection mark even for the whole collection (the fingerprint of
    /// no filter and no limit, and the user): it fits too, and that user's first sync is a `304`
    /// or a small delta (another user's, or one from other rules, is reset by the server once).
    static func snapshotFits(_ entityTag: String, _ selection: Selection) -> Bool {
        guard let mark = (try? Token(entityTag: entityTag))?.selection else { return selection.isEverything }
        return mark.fingerprint == selection.fingerprint && (!selection.isEverything || mark.user != nil)
    }

    /// The selection `collection` was installed for (`storedForm`); empty when none was recorded.
    func installedSelection(of collection: String) throws -> String {
        let statement = try connection.statement("SELECT value FROM sync_state WHERE key = ?")
        defer { statement.reset() }
        try statement.bind([.text("selection:" + collection)])
        guard try statement.step(), !statement.isNull(0) else { return "" }
        return statement.string(0)
    }

    /// Records the selection `collection` now holds (inside the transaction that installed it).
    func setInstalledSelection(_ selection: Selection, of collection: String) throws {
        try connection.statement("INSERT OR REPLACE INTO sync_state(key, value) VALUES (?, ?)")
            .run(.text("selection:" + collection), .text(Self.storedForm(selection)))
    }
}

/// Cuts a snapshot's records of one collection down to a selection as they stream past in id order.
struct SelectionCut {
    let selection: Selection
    private var kept = 0

    init(_ selection: Selection) { self.selection = selection }

    /// Whether `record` (the next in id order) belongs to the selection.
    mutating func keeps(_ record: Record) -> Bool {
        if let limit = selection.limit, kept >= limit { return false }
        guard selection.matches(body: record.body) else { return false }
        kept += 1
        return true
    }
}

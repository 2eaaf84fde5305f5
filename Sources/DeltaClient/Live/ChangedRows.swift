/// What commits changed, as live queries need to know it: for each collection written, the ids of
/// its rows written, or `unknown` where more than `ChangedRows.limit` were (a reset, a large
/// delta); or anything anywhere (`everything`: another process's commit, notes that could not be
/// read). A live query with the ids patches its result with those rows alone; otherwise it reads
/// its whole result again.
struct ChangedRows: Sendable, Equatable {
    /// The rows of one collection changed.
    enum Rows: Sendable, Equatable {
        /// These ids, and no others.
        case ids(Set<String>)
        /// Any of them: read the whole result again.
        case unknown

        /// Both changes together; `unknown` past `ChangedRows.limit` ids.
        func union(_ other: Rows) -> Rows {
            guard case .ids(let mine) = self, case .ids(let theirs) = other else { return .unknown }
            let both = mine.union(theirs)
            return both.count > ChangedRows.limit ? .unknown : .ids(both)
        }
    }

    /// How many ids of one collection are kept before the change counts as `unknown`: past this a
    /// whole read is cheaper than patching row by row, and the notes stay small.
    static let limit = 64

    /// Each changed collection's rows; nil: every collection, any row.
    private(set) var collections: [String: Rows]?

    /// Nothing changed.
    static let nothing = ChangedRows(collections: [:])
    /// Anything may have changed.
    static let everything = ChangedRows(collections: nil)

    /// The changed rows of `collections`.
    init(collections: [String: Rows]?) { self.collections = collections }

    /// Whether nothing changed.
    var isEmpty: Bool { collections?.isEmpty ?? false }

    /// What changed in `collection`: nil when nothing did.
    func rows(of collection: String) -> Rows? {
        guard let collections else { return .unknown }
        return collections[collection]
    }

    /// Adds `other`'s changes to these.
    mutating func formUnion(_ other: ChangedRows) {
        guard let theirs = other.collections, var mine = collections else {
            collections = nil
            return
        }
        for (collection, rows) in theirs { mine[collection] = mine[collection].map { $0.union(rows) } ?? rows }
        collections = mine
    }
}

import DeltaCore

/// Where a selection's limit cuts: the `SelectionFeed`'s cut before and after a delta.
extension SelectionFeed {
    /// The id of the `limit`th matching visible record, when the limit is reached.
    ///
    /// For a delta from a token whose limit was reached at `before`, the new cut follows from the
    /// changes alone: of the records up to `before`, `limit` matched then, and the changed ones
    /// that entered or left the filter move that count; the cut then walks down from `before`
    /// (the count grew) or up past it (it shrank) over the matching records, a walk as long as
    /// the number of changes. Otherwise it reads the selection from its first record.
    static func boundary(_ source: any SelectionSource, _ mode: FeedMode, _ selection: Selection, before: String?) async throws -> String? {
        guard let limit = selection.limit else { return nil }
        guard case .delta = mode, let before else { return try await scan(source, selection, after: nil, wanted: limit) }
        var count = limit
        while let rows = try await source.changed(maximum: page) {
            for row in rows where within(row.id, before) {
                let was = row.before.map { selection.matches(body: $0) } ?? false
                let now = !row.hidden && selection.matches(body: row.body)
                if was != now { count += now ? 1 : -1 }
            }
        }
        try await source.rewindChanged()
        if count < limit { return try await scan(source, selection, after: before, wanted: limit - count) }
        // The (count - limit + 1)th matching record walking down from `before`, itself included.
        var wanted = count - limit + 1
        var from = before
        var inclusive = true
        while true {
            let rows = try await source.visible(downFrom: from, inclusive: inclusive, maximum: page)
            for row in rows where selection.matches(body: row.body) {
                wanted -= 1
                if wanted == 0 { return row.id }
            }
            guard rows.count == page, let last = rows.last else {
                throw StoreError(.corrupt, "selection", "fewer matching records before the cut than its token counted", evidence: before)
            }
            from = last.id
            inclusive = false
        }
    }

    /// The id of the `wanted`th matching visible record after `after` (from the first without
    /// it), nil when there are fewer.
    static func scan(_ source: any SelectionSource, _ selection: Selection, after: String?, wanted: Int) async throws -> String? {
        var count = 0
        var after = after
        while true {
            let rows = try await source.visible(after: after, through: nil, unchangedSince: nil, maximum: page)
            for row in rows where selection.matches(body: row.body) {
                count += 1
                if count == wanted { return row.id }
            }
            guard rows.count == page, let last = rows.last else { return nil }
            after = last.id
        }
    }

    /// Whether `id` is at or before the cut `cut` (nil: no cut, everything is).
    static func within(_ id: String, _ cut: String?) -> Bool {
        guard let cut else { return true }
        return id == cut || id.utf8.lexicographicallyPrecedes(cut.utf8)
    }
}

import DeltaCore

/// The exact answer for a selection (docs/PROTOCOL.md, "Selections"), computed from a backend's
/// `SelectionSource`: after applying it, a replica holds exactly the visible records that match
/// the filter and fall inside the limit at the answer's token.
///
/// A delta from a token at position `p` whose mark says the limit ended at id `B` (nil: no cut):
/// - every record changed after `p` whose current version is inside the selection comes whole;
///   one whose version at `p` was inside (`before` matched and its id ≤ `B`) and is not now comes
///   as a tombstone; one that was outside then and is outside now is not sent at all;
/// - with a limit, the unchanged matching records between the old and new cut come whole (the
///   window grew) or as tombstones (it shrank).
/// When nothing is to be sent, the answer is `304`, even if the collection changed.
///
/// The selection's state digest travels in its token: the answer's digest is the token's plus
/// what the answer adds and removes, found by computing the answer before sending it (the
/// headers carry the digest). An answer of up to `keptBytes` is kept from that pass and sent as
/// it is; a larger one is computed again while streaming, so memory stays bounded.
package final class SelectionFeed: ChangeFeed, @unchecked Sendable {
    /// The selection's token at the answer's position: the collection's, marked with the selection and its new cut.
    package private(set) var token: Token
    /// The whole selection, or its changes after the token asked from.
    package let mode: FeedMode
    /// The selection's state digest at `token`.
    package var digest: StateDigest { token.selection?.digest ?? .empty }
    private let source: any SelectionSource
    private let selection: Selection
    /// The selection the replica held at the token asked from (`selection`, unless a rule changed).
    private let held: Selection
    /// Whether `held` differs from `selection`: unchanged records may enter or leave.
    private let regranted: Bool
    /// What a tombstone carries.
    private let tombstones: Tombstones
    private let cutBefore: String?
    private let cutNow: String?
    /// Where `produce` is: the records (a full answer) or the changed ones (a delta), then the
    /// unchanged ones between a delta's two cuts, then nothing.
    private enum Phase { case records, betweenCuts, done }
    private var phase = Phase.records
    private var cursor: String?
    private var emitted = 0
    private var pending: [Piece] = []
    private var sent = 0
    static let page = 1000
    /// The largest answer (bytes of bodies) kept from the digest's pass instead of computed again.
    package static let keptBytes = 4 << 20

    /// Computes the start of `selection`'s answer from `source`: the feed, or `304` when it would send nothing.
    /// `mark` is the selection mark of the token asked from (ignored for a full read); an answer
    /// larger than `keptBytes` is computed twice rather than held in memory.
    ///
    /// Under a rule (a user's read), `held` is the selection the replica held at the token: the
    /// rule as it was then, ANDed with the user's selection. When it differs from `selection`
    /// (a grant or a revoke since), every unchanged record that enters or leaves comes too, whole
    /// or as a tombstone (`regranted`), and `user` is carried in the answer's token, with
    /// `fingerprint` (the user's own selection's) in place of `selection`'s. `tombstones` says
    /// what a record that leaves the selection carries: a collection under rules sends `.bare`
    /// ones, which name the id alone.
    package static func open(
        _ source: any SelectionSource, _ mode: FeedMode, selection: Selection, mark: SelectionMark?, held: Selection? = nil, user: UserMark? = nil,
        fingerprint: String? = nil, tombstones: Tombstones = .whole, keptBytes: Int = keptBytes
    ) async throws -> ReadResult {
        do {
            let held = held ?? selection
            let regranted = mode != .full && held.filter != selection.filter
            let cut = try await boundary(source, mode, selection, before: regranted ? nil : mark?.boundary)
            let fingerprint = fingerprint ?? selection.fingerprint
            let planned = source.token.marked(SelectionMark(fingerprint: fingerprint, boundary: cut, digest: .empty, user: user))
            let feed = SelectionFeed(
                source: source, mode: mode, selection: selection, held: held, regranted: regranted, tombstones: tombstones, token: planned,
                cutBefore: mark?.boundary, cutNow: cut)
            var digest = mode == .full ? StateDigest.empty : mark?.digest ?? .empty
            var pieces = 0
            var bytes = 0
            var kept: [Piece]? = []
            while let more = try await feed.produce() {
                pieces += more.count
                for piece in more {
                    if let replaced = piece.replaced { digest.remove(body: replaced) }
                    if !piece.hidden { digest.add(body: piece.body) }
                    bytes += piece.body.count
                }
                if bytes <= keptBytes { kept?.append(contentsOf: more) } else { kept = nil }
            }
            feed.token = source.token.marked(SelectionMark(fingerprint: fingerprint, boundary: cut, digest: digest, user: user))
            if case .delta = mode {
                if pieces == 0 {
                    feed.close()
                    return .notModified(feed.token, digest)
                }
            }
            if let kept {
                feed.pending = kept  // the whole answer; `phase` is already `.done`
                return .changes(feed)
            }
            // Too large to keep: start over to send it.
            if case .delta = mode { try await source.rewindChanged() }
            (feed.phase, feed.cursor, feed.emitted) = (.records, nil, 0)
            return .changes(feed)
        } catch {
            source.close()
            throw error
        }
    }

    private init(
        source: any SelectionSource, mode: FeedMode, selection: Selection, held: Selection, regranted: Bool, tombstones: Tombstones, token: Token,
        cutBefore: String?, cutNow: String?
    ) {
        self.source = source
        self.mode = mode
        self.selection = selection
        self.held = held
        self.regranted = regranted
        self.tombstones = tombstones
        self.token = token
        self.cutBefore = cutBefore
        self.cutNow = cutNow
    }

    deinit { close() }

    /// The next records of the answer (about `maximumBytes` of bodies), nil at its end.
    package func next(maximumBytes: Int) async throws -> RecordBatch? {
        var batch = RecordBatch(capacity: maximumBytes + 4096)
        while batch.bytes.count < maximumBytes {
            if sent == pending.count {
                guard let more = try await produce() else { break }
                (pending, sent) = (more, 0)
            }
            let piece = pending[sent]
            sent += 1
            piece.body.withUnsafeBytes { batch.append(body: $0, hidden: piece.hidden) }
        }
        return batch.isEmpty ? nil : batch
    }

    /// Ends the read transaction; safe to call more than once.
    package func close() { source.close() }

    /// A record of the answer: sent whole or as a tombstone, and the version of it the selection
    /// held at the token asked from, when it held one (what the digest loses).
    private struct Piece {
        let hidden: Bool
        let body: [UInt8]
        let replaced: [UInt8]?
    }

    /// The next non-empty part of the answer, nil at its end.
    private func produce() async throws -> [Piece]? {
        while true {
            switch (mode, phase) {
            case (.full, .records):
                if let limit = selection.limit, emitted >= limit {
                    phase = .done
                    continue
                }
                let rows = try await source.visible(after: cursor, through: cutNow, unchangedSince: nil, maximum: Self.page)
                if rows.count < Self.page { phase = .done }
                cursor = rows.last?.id
                let out = rows.filter { selection.matches(body: $0.body) }.map { Piece(hidden: false, body: $0.body, replaced: nil) }
                emitted += out.count
                if !out.isEmpty { return out }
            case (.delta, .records):
                guard let rows = try await source.changed(maximum: Self.page) else {
                    phase = .betweenCuts
                    continue
                }
                var out: [Piece] = []
                for row in rows {
                    let was = row.before.flatMap { Self.within(row.id, cutBefore) && held.matches(body: $0) ? $0 : nil }
                    if !row.hidden && Self.within(row.id, cutNow) && selection.matches(body: row.body) {
                        out.append(Piece(hidden: false, body: row.body, replaced: was))
                    } else if let was {
                        out.append(Piece(hidden: true, body: tombstones.body(id: row.id, stored: row.body), replaced: was))  // inside then, not now
                    }
                }
                if !out.isEmpty { return out }
            case (.delta(let since), .betweenCuts) where regranted:
                // The rule changed: any unchanged record may have entered or left.
                let rows = try await source.visible(after: cursor, through: nil, unchangedSince: since, maximum: Self.page)
                if rows.count < Self.page { phase = .done }
                cursor = rows.last?.id ?? cursor
                var out: [Piece] = []
                for row in rows {
                    let was = Self.within(row.id, cutBefore) && held.matches(body: row.body)
                    let now = Self.within(row.id, cutNow) && selection.matches(body: row.body)
                    if now && !was { out.append(Piece(hidden: false, body: row.body, replaced: nil)) }
                    if was && !now { out.append(Piece(hidden: true, body: tombstones.body(id: row.id, stored: row.body), replaced: row.body)) }
                }
                if !out.isEmpty { return out }
            case (.delta(let since), .betweenCuts):
                // The window's cut moved: unchanged records between the two cuts entered or left it.
                guard selection.limit != nil, cutBefore != cutNow else {
                    phase = .done
                    continue
                }
                let grew = Self.within(cutBefore ?? "", cutNow) && cutBefore != nil
                let low = grew ? cutBefore : cutNow
                let high = grew ? cutNow : cutBefore
                let rows = try await source.visible(after: cursor ?? low, through: high, unchangedSince: since, maximum: Self.page)
                if rows.count < Self.page { phase = .done }
                cursor = rows.last?.id ?? cursor
                let out = rows.filter { selection.matches(body: $0.body) }.map {
                    Piece(hidden: !grew, body: grew ? $0.body : tombstones.body(id: $0.id, stored: $0.body), replaced: grew ? nil : $0.body)
                }
                if !out.isEmpty { return out }
            default:
                return nil
            }
        }
    }
}

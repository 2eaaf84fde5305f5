public import DeltaCore
import DeltaSQLite
public import DeltaStore

/// A reader connection kept for early verdicts, with its last verdict (`VerdictMemo`).
/// Confined like its connection: one holder at a time, through `SQLiteStore.earlyReaders`.
final class EarlyReader: @unchecked Sendable {
    let connection: Connection
    var memo: VerdictMemo?

    init(_ connection: Connection) { self.connection = connection }
}

/// A reader's last verdict, valid while the database's `data_version` is unchanged: "not
/// modified" with the current token and digest, or nil when something changed after `since`
/// (a client repeating an old token on one connection is asked about it once per commit).
struct VerdictMemo: Sendable {
    let dataVersion: Int64
    let collection: CollectionName
    let since: Since
    let current: (token: Token, digest: StateDigest)?
}

extension SQLiteStore: EarlyVerdicts {
    /// `304` when the verdict is "not modified": from this thread's memo while the write-ahead
    /// log's index header is the one read before the verdict was decided (`EarlyVerdictMemo`, no
    /// lock), else from an idle early reader, when one is idle.
    ///
    /// Each early reader also remembers its last verdict, "not modified" or not, with the
    /// database's `data_version` read before it; while no commit has happened since (the version
    /// is unchanged), the same question gets the same answer without the verdict query. That
    /// serves while the header cannot be trusted (a writer between its copies, or rebuilt).
    public func earlyVerdict(_ collection: CollectionName, since: Since) -> EarlyVerdict {
        guard since != .nothing else { return .unknown }
        // Read before any verdict is decided: a verdict remembered under it is from a read that began after it.
        let header = walIndex?.header()
        let memo = header == nil ? nil : EarlyVerdictMemo.forThisThread(store: memoNumber)
        if let header, let entry = memo?.verdict(collection, since: since, header: header) {
            return entry.current.map { .notModified($0.token, $0.digest) } ?? .unknown
        }
        guard let current = verdictFromReader(collection, since: since) else { return .unknown }
        if let header, let memo { memo.remember(EarlyVerdictMemo.Entry(collection: collection, since: since, current: current), after: header) }
        return current.map { .notModified($0.token, $0.digest) } ?? .unknown
    }

    /// The early verdict from an idle early reader: the current token and digest when `since` is
    /// current, nil inside when it is not; nil when no reader is idle or SQLite failed (a failure
    /// is not remembered).
    private func verdictFromReader(_ collection: CollectionName, since: Since) -> ((token: Token, digest: StateDigest)?)? {
        guard let reader = earlyReaders.checkoutIdle() else { return nil }
        defer { earlyReaders.checkin(reader) }
        let connection = reader.connection
        guard let version = try? connection.dataVersion() else { return nil }
        if let memo = reader.memo, memo.dataVersion == version, memo.collection == collection, memo.since == since {
            return .some(memo.current)
        }
        guard (try? connection.statement("BEGIN").step()) != nil else { return nil }
        // Changed records are not counted: only "not modified" is answered here.
        let verdict = try? evaluate(connection, collection, since, wholeCollection: false)
        _ = try? connection.statement("COMMIT").step()
        guard let verdict else { return nil }
        var current: (token: Token, digest: StateDigest)?
        if case .answer(.notModified(let token, let digest)) = verdict { current = (token, digest) }
        reader.memo = VerdictMemo(dataVersion: version, collection: collection, since: since, current: current)
        return .some(current)
    }
}

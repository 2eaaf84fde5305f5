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
    /// `304` from an idle early reader, when one is idle and the verdict is "not modified".
    ///
    /// Each early reader remembers its last verdict, "not modified" or not, with the database's
    /// `data_version` read before it; while no commit has happened since (the version is
    /// unchanged), the same question gets the same answer without the verdict query.
    public func earlyVerdict(_ collection: CollectionName, since: Since) -> EarlyVerdict {
        guard since != .nothing, let reader = earlyReaders.checkoutIdle() else { return .unknown }
        defer { earlyReaders.checkin(reader) }
        let connection = reader.connection
        guard let version = try? connection.dataVersion() else { return .unknown }
        if let memo = reader.memo, memo.dataVersion == version, memo.collection == collection, memo.since == since {
            return memo.current.map { .notModified($0.token, $0.digest) } ?? .unknown
        }
        guard (try? connection.statement("BEGIN").step()) != nil else { return .unknown }
        // Changed records are not counted: only "not modified" is answered here.
        let verdict = try? evaluate(connection, collection, since, wholeCollection: false)
        _ = try? connection.statement("COMMIT").step()
        guard let verdict else { return .unknown }  // a failure is not remembered
        guard case .answer(.notModified(let token, let digest)) = verdict else {
            reader.memo = VerdictMemo(dataVersion: version, collection: collection, since: since, current: nil)
            return .unknown
        }
        reader.memo = VerdictMemo(dataVersion: version, collection: collection, since: since, current: (token, digest))
        return .notModified(token, digest)
    }
}

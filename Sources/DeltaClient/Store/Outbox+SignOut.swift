import DeltaCore
import DeltaSQLite
import Foundation

extension Outbox {
    /// Local writes not yet settled: queued mutations, and conflicts (denied ones included) the
    /// app has not resolved.
    func unsettledCount() throws -> Int {
        try read { connection in
            let queued = try connection.integer("SELECT count(*) FROM mutations") ?? 0
            let conflicted = try connection.integer("SELECT count(*) FROM conflicts") ?? 0
            return Int(queued + conflicted)
        }
    }

    /// Drops every local write (queue, local versions, conflicts, acknowledgements) and gives
    /// the install a new client id, in one transaction: what a sign-out leaves for the next user.
    /// (A client id belongs to the principal that first pushed with it: the client key or one user.)
    func discardAll() throws {
        let id = UUID().uuidString.lowercased()
        try write { connection in
            for table in ["mutations", "overlay", "acknowledged", "conflicts"] { try connection.execute("DELETE FROM \(table)") }
            try connection.statement("INSERT OR REPLACE INTO meta(key, value) VALUES ('client', ?)").run(.text(id))
        }
        identity.withLock { $0 = id }
    }
}

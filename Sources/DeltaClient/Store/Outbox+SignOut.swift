import DeltaCore
import DeltaSQLite
import Foundation

extension Outbox {
    /// Local writes not yet settled, by what settles them.
    struct Unsettled: Sendable, Equatable {
        /// Mutations queued or sent and not yet answered: a sync settles them.
        var queued = 0
        /// Conflicts with the server's copy: `resolve` settles them.
        var conflicts = 0
        /// Writes the server refused (`denied`): `discard` or `resolve` settles them.
        var denied = 0

        /// What the app (or the command line's user) can do about them, in a sentence fragment.
        var advice: String {
            var steps: [String] = []
            if queued > 0 { steps.append("\(queued) queued write\(queued == 1 ? " is" : "s are") not on the server yet (sync sends them)") }
            if conflicts > 0 { steps.append("\(conflicts) conflict\(conflicts == 1 ? " waits" : "s wait") for a resolution (resolve)") }
            if denied > 0 { steps.append("\(denied) denied write\(denied == 1 ? " waits" : "s wait") to be discarded or edited (discard, resolve)") }
            return steps.joined(separator: "; ") + "; or sign out discarding them"
        }

        /// The counts, for an error's evidence.
        var evidence: String { "\(queued) queued, \(conflicts) conflicted, \(denied) denied" }
    }

    /// Local writes not yet settled, nil when there are none: queued mutations, and conflicts
    /// (denied ones apart) the app has not resolved.
    func unsettled() throws -> Unsettled? {
        // A turned-down mutation leaves the queue when its answer is stored as a conflict.
        let tally = try tally()
        let found = Unsettled(queued: tally.queued, conflicts: tally.conflicts, denied: tally.denied)
        return found == Unsettled() ? nil : found
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

    /// Copies the outbox's write-ahead log back into its file and empties it: what a sign-out
    /// does last, so that no earlier version of a discarded write stays in the log. Returns
    /// whether a read kept it from completing.
    func checkpoint() throws -> Bool {
        try read { connection in (try connection.integer("PRAGMA wal_checkpoint(TRUNCATE)") ?? 0) != 0 }
    }
}

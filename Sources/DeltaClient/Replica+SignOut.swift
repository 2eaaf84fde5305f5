import DeltaCore
import DeltaSQLite
import Foundation

extension Replica {
    /// Signs the user out: every collection whose answers depended on the user (the server's
    /// rules restrict it) goes back to the bundled snapshot, and the outbox is emptied, its
    /// client id replaced. Public collections are kept.
    ///
    /// While local writes are not settled (queued, or conflicts and denied writes not resolved)
    /// it refuses, saying how many, unless `discardingPendingWrites`. It is safe against a kill
    /// at any moment: a mark written first makes the next `open` finish it before anything is
    /// read, so one user's rows are never shown to the next.
    public func signOut(discardingPendingWrites: Bool = false) async throws {
        // From here no sync starts and no write is taken (`Outbox.appWrite`): a running sync is cancelled
        // and awaited (its transaction then commits nothing, so nothing it pulled lands after the
        // sign-out), and the check for unsettled writes below sees every write there will be.
        let running = coordination.withLock { state -> Task<SyncReport, any Error>? in
            state.signingOut += 1
            return state.running
        }
        outbox.signOut(true)
        defer {
            outbox.signOut(false)
            coordination.withLock { $0.signingOut -= 1 }
        }
        running?.cancel()
        _ = await running?.result
        if !discardingPendingWrites, let unsettled = try await background({ [outbox] in try outbox.unsettled() }) {
            throw ReplicaError(.configuration, "cannot sign out: \(unsettled.advice)", evidence: unsettled.evidence)
        }
        try await signOutNow()
    }

    /// Forgets the token the replica keeps, so that the next request asks the app's
    /// `credentials` again: after the app's session changed (another user signed in, or the same
    /// one with new claims). A token for another user than the one whose rows the replica holds
    /// signs that user out before any request (`sync`).
    public func invalidateCredentials() {
        fetcher.credentials?.forget()
    }

    /// Runs a sign-out on the store's queue and sends the new client id from then on.
    private func signOutNow() async throws {
        let outbox = self.outbox
        let snapshot = configuration.snapshotURL
        let blobs = self.blobs
        // Live queries go from the user's rows to none of them in one step, at once, even when
        // a sync holds the hub (a new user's token signs the previous one out inside a sync).
        changes.hold()
        do {
            defer {
                changes.release()
                changes.flush()
            }
            try await store.run { database, _ in try Self.signOut(database, outbox, snapshot, blobs, begin: true) }
        }
        fetcher.client.withLock { $0 = outbox.clientID }
        readOnly.withLock { $0 = [] }
        // The sign-out has happened (its commits woke the live queries): the status shows it, and
        // the user's token goes, even when emptying the logs (next) fails.
        scheduleWriteRefresh()
        fetcher.credentials?.forget()
        // No read of this process is open while the logs are emptied (one would keep old pages in them).
        try await store.run { [reader] database, _ in try reader.holding { try Self.emptyLogs(database, outbox) } }
    }

    /// Runs (with `begin`) or finishes (after a kill) a sign-out; every step can run again. The
    /// user's collections are those noted as theirs and those holding a token issued to them
    /// (`userCollections`). The user's blobs go with their rows: every blob goes but those a row
    /// still held references (a public collection's, or the bundled snapshot's) and those the
    /// snapshot brought; one the server gave only to the user's credential goes in any case.
    static func signOut(_ database: ReplicaDatabase, _ outbox: Outbox, _ snapshot: URL, _ blobs: ReplicaBlobs, begin: Bool) throws {
        if begin { try database.setSyncText("signing-out", "1") }
        guard try database.syncText("signing-out") != nil else { return }
        try outbox.discardAll()
        let collections = try database.userCollections()
        try database.install(Set(collections), from: snapshot) { false }
        // FTS5 keeps a deleted row's words in its index segments, marked deleted, until they
        // merge: `optimize` writes the index again without them (secure_delete zeroes the rest).
        if try database.connection.integer("SELECT count(*) FROM sqlite_schema WHERE name = 'search'") ?? 0 > 0 {
            try database.connection.execute("INSERT INTO search(search) VALUES('optimize')")
        }
        // The next user's first sync resets these from the snapshot's token: a fresh start, not a loop.
        for collection in collections { try database.setResetStreak(nil, of: collection) }
        try blobs.removeAll(keeping: try database.referencedBlobs())
        try database.setSyncText("user", nil)
        // The logs are emptied next (`emptyLogs`); until that is done, every open tries again.
        try database.setSyncText("logs-to-empty", "1")
        try database.setSyncText("signing-out", nil)
    }

    /// The deleted rows were zeroed in their pages (`secure_delete`); the write-ahead logs still
    /// hold earlier versions of those pages until they are copied back and emptied. Throws when
    /// a read (of another process: this one's are held off) kept a log from being emptied; the
    /// next open, or sign-out, tries again.
    static func emptyLogs(_ database: ReplicaDatabase, _ outbox: Outbox) throws {
        guard try database.syncText("logs-to-empty") != nil else { return }
        // Both logs are tried, whichever is blocked.
        let storeBlocked = try (database.connection.integer("PRAGMA wal_checkpoint(TRUNCATE)") ?? 0) != 0
        let outboxBlocked = try outbox.checkpoint()
        if storeBlocked || outboxBlocked {
            throw ReplicaError(
                .store, "signed out, but a read kept the write-ahead log from being emptied; the next open empties it",
                evidence: database.path)
        }
        try database.setSyncText("logs-to-empty", nil)
    }

    /// Before a sync with credentials: the app's `credentials` are asked again (its session may
    /// have moved to another user since the last sync), and a token for another user than the
    /// one whose rows the replica holds signs the previous one out first (their unsettled writes
    /// refuse it), before any request.
    func checkUser() async throws {
        guard let credentials = fetcher.credentials, let token = try await credentials.token(refreshing: true),
            let user = Credentials.subject(of: token)
        else { return }
        let held = try await store.run { database, _ in try database.syncText("user") }
        if let held, held != user {
            outbox.signOut(true)
            defer { outbox.signOut(false) }
            if let unsettled = try await background({ [outbox] in try outbox.unsettled() }) {
                throw ReplicaError(
                    .configuration, "another user signed in while \(String(reflecting: held))'s writes are not settled: \(unsettled.advice)",
                    evidence: unsettled.evidence)
            }
            try await signOutNow()
        }
        // The first user on an install that pushed with the client key: the id is the client key's.
        if held == nil, try await background({ [outbox] in try outbox.hasNumbered() }) {
            try outbox.startNewClient()
            fetcher.client.withLock { $0 = outbox.clientID }
        }
        if held != user {
            try await store.run { database, _ in try database.setSyncText("user", user) }
            // Another principal: what it may write is not what the previous one could.
            readOnly.withLock { $0 = [] }
        }
    }
}

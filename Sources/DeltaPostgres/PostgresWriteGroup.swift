import DeltaCore
import DeltaStore
import NIOConcurrencyHelpers
import PostgresNIO

/// Group commit: the writes one instance receives while another write holds the write lock
/// join one PostgreSQL transaction, and commit together.
///
/// Every write on every instance takes one advisory lock (`PostgresStore.writeLock`), which it
/// holds until its commit is durable, so that positions become visible strictly in order. Alone,
/// each write paid for the lock, the head read, the digest update and the `COMMIT`'s flush of
/// the WAL while every other writer waited: about 300 commits a second on the benchmark
/// machine, though PostgreSQL itself commits 14,000 (docs/decisions/2026-11-28-postgres-group-commit.md).
///
/// A group is one transaction: its first write (the leader) takes a writer connection, begins,
/// takes the lock and reads the head. Writes that arrive meanwhile wait for their turn and run
/// one after another on the same connection, each after the first under a `SAVEPOINT`, and each
/// taking the next position of its own, with its own commit row, tag and `CommitResult`: to
/// readers and to the commit chain, exactly the commits the writes would have made one by one,
/// in the order they ran. A write whose body or statements fail rolls back to its savepoint (the
/// first: the transaction begins again) and fails alone; the others go on. The last write of the
/// group (the one that finds nobody waiting) writes the commit rows, adds the group's change to
/// each collection's state digest and commits; every write of the group, a failed one too,
/// answers once that commit has ended, and fails if it failed. Readers, in their own snapshots,
/// see the whole group or none of it.
final class PostgresWriteGroup: @unchecked Sendable {
    // The coordination below is guarded by `lock`. The transaction's own state (`connection`,
    // `head`, `changes`, `members`) belongs to whichever write holds the turn: the turn passes
    // through `lock`, which orders those accesses.
    private let lock = NIOLock()
    /// Writes waiting for the turn, in arrival order.
    private var waiting: [CheckedContinuation<Turn, Never>] = []
    /// Writes that ran and wait for the group's commit (nil: committed; else why not).
    private var finishing: [CheckedContinuation<(any Error)?, Never>] = []
    /// Writes joined so far, the leader included.
    private var joined = 1
    /// No more writes may join: the group is committing, or failed to begin.
    private var closed = false

    /// The transaction's connection, once the leader began it.
    var connection: PostgresConnection?
    /// The newest position and its tag, as the transaction sees them: the head the lock found,
    /// then each member's commit.
    var head: (position: UInt64, tag: UInt32) = (0, 0)
    /// Each collection's change to its state digest and visible count, summed over the members.
    var changes: [CollectionName: StateChange] = [:]
    /// Writes that ran in the transaction so far (0: the next one is its first, without a savepoint).
    var members = 0
    /// Ids the group's writes claimed in `pg_temp.written` (`PostgresWriteGroups.noteClaims`).
    var claimedRows = 0
    /// The group's commits so far, in order: their rows are written when the group commits.
    var commits: [Commit] = []

    /// One commit of the group.
    struct Commit {
        /// The collection it changed.
        let collection: CollectionName
        /// Its position and tag.
        let token: Token
        /// When it was made, in Unix seconds.
        let at: Int64
    }
    /// Why the transaction cannot commit, when a savepoint could not be set or rolled back to:
    /// the writes after it fail at once, and so does the commit.
    var broken: (any Error)?

    /// Takes the write lock and returns the newest commit, in one round trip: a `VOLATILE`
    /// function's statements each take a new snapshot, so the head is read after the lock is
    /// held, and is the newest (PostgreSQL makes a commit visible before it releases its locks).
    static let headFunction = """
        CREATE OR REPLACE FUNCTION deltasnap.write_head(lock bigint) RETURNS TABLE(head bigint, head_tag bigint)
        LANGUAGE plpgsql VOLATILE AS $fn$
        BEGIN
            PERFORM pg_advisory_xact_lock(lock);
            RETURN QUERY SELECT c.position, c.tag FROM deltasnap.commits c ORDER BY c.position DESC LIMIT 1;
        END $fn$
        """

    /// The sum of two state digests modulo 2^256, as `StateDigest.add` computes it (32 bytes,
    /// most significant first): a group adds its change to the stored digest in the statement
    /// that writes it, without reading it first.
    static let digestFunction = """
        CREATE OR REPLACE FUNCTION deltasnap.digest_add(a bytea, b bytea) RETURNS bytea
        LANGUAGE plpgsql IMMUTABLE STRICT AS $fn$
        DECLARE
            result bytea := a;
            carry integer := 0;
            total integer;
        BEGIN
            IF length(a) <> 32 OR length(b) <> 32 THEN
                RAISE EXCEPTION 'deltasnap.digest_add: digests are 32 bytes (got % and %)', length(a), length(b);
            END IF;
            FOR i IN REVERSE 31..0 LOOP
                total := get_byte(a, i) + get_byte(b, i) + carry;
                result := set_byte(result, i, total & 255);
                carry := total >> 8;
            END LOOP;
            RETURN result;
        END $fn$
        """

    /// Most writes in one group: bounds how long the lock is held, and how long the first write
    /// of a group waits for the commit.
    static let maximumMembers = 32

    /// What a write that asks to join is told.
    enum Turn {
        /// Its turn: run on the group's transaction.
        case run
        /// The group could not begin (`error`); nothing was written.
        case failed(any Error)
        /// The group is committing, or full: it did not join.
        case closed
    }

    /// Joins this group if it is open and not full; `continuation` is resumed when the turn
    /// comes, or at once with `closed`.
    func join(_ continuation: CheckedContinuation<Turn, Never>) {
        let joinedNow = lock.withLock {
            guard !closed, joined < Self.maximumMembers else { return false }
            joined += 1
            waiting.append(continuation)
            return true
        }
        if !joinedNow { continuation.resume(returning: .closed) }
    }

    /// Ends the caller's turn: returns the waiting write to hand it to (the caller then waits
    /// for the commit, `awaitCommit`), or nil when none waits: the group is closed and the
    /// caller must commit it.
    func passTurn() -> CheckedContinuation<Turn, Never>? {
        lock.withLock {
            if waiting.isEmpty {
                closed = true
                return nil
            }
            return waiting.removeFirst()
        }
    }

    /// Waits for the group's commit: nil once it is durable, else why it failed. At once when
    /// it has ended already (the write that commits may finish before a write that handed it
    /// the turn gets here).
    func awaitCommit() async -> (any Error)? {
        await withCheckedContinuation { continuation in
            let ended: Outcome? = lock.withLock {
                if outcome == nil { finishing.append(continuation) }
                return outcome
            }
            if let ended { continuation.resume(returning: ended.failure) }
        }
    }

    /// How the group's commit ended, once it has.
    private struct Outcome {
        /// Nil: durable.
        let failure: (any Error)?
    }
    /// Set once by `finish`.
    private var outcome: Outcome?

    /// Records how the commit ended and tells every write waiting for it.
    func finish(_ failure: (any Error)?) {
        let waiters = lock.withLock {
            outcome = Outcome(failure: failure)
            let waiters = finishing
            finishing = []
            return waiters
        }
        for waiter in waiters { waiter.resume(returning: failure) }
    }

    /// The group could not begin: closes it and tells every waiting write (each fails with `error`).
    func failToBegin(_ error: any Error) {
        let waiters = lock.withLock {
            closed = true
            let waiters = waiting
            waiting = []
            return waiters
        }
        for waiter in waiters { waiter.resume(returning: .failed(error)) }
    }
}

/// The group writes join: at most one open at a time per store.
final class PostgresWriteGroups: Sendable {
    private let open = NIOLockedValueBox<PostgresWriteGroup?>(nil)
    /// The last claim key handed out (`PostgresWriteTransaction.claim`).
    private let lastClaim = NIOLockedValueBox<Int64>(0)
    /// About how many claimed ids each writer connection's `pg_temp.written` holds.
    private let claimedRows = NIOLockedValueBox<[ObjectIdentifier: Int]>([:])

    /// Claimed ids a writer connection keeps before they are swept (`sweep`).
    static let claimsKept = 100_000

    /// A claim key no other write of this process used: claims outlive their transactions
    /// (the table of claimed ids is not emptied at each commit, `PostgresStore.prepareWriter`).
    func nextClaim() -> Int64 {
        lastClaim.withLockedValue { value in
            value += 1
            return value
        }
    }

    /// Notes the ids a group claimed on `connection`.
    func noteClaims(_ count: Int, on connection: PostgresConnection) {
        guard count > 0 else { return }
        claimedRows.withLockedValue { $0[ObjectIdentifier(connection), default: 0] += count }
    }

    /// Whether `connection`'s claimed ids should be swept now, before its next transaction
    /// (and, if so, counts them as swept).
    func sweep(_ connection: PostgresConnection) -> Bool {
        claimedRows.withLockedValue { rows in
            guard rows[ObjectIdentifier(connection), default: 0] >= Self.claimsKept else { return false }
            rows[ObjectIdentifier(connection)] = nil
            return true
        }
    }

    /// How a write enters a group.
    enum Entry {
        /// It leads a new group: it must begin the transaction.
        case lead(PostgresWriteGroup)
        /// It joined the open group and holds the turn, or failed with the group.
        case member(PostgresWriteGroup, PostgresWriteGroup.Turn)
    }

    /// Joins the open group, waiting for the turn, or starts a new group.
    func enter() async -> Entry {
        while true {
            let current = open.withLockedValue { $0 }
            if let current {
                let turn = await withCheckedContinuation { current.join($0) }
                if case .closed = turn {} else { return .member(current, turn) }
            }
            // None open, or it closed: start one, unless another write just did.
            let started = open.withLockedValue { value -> PostgresWriteGroup? in
                guard value === current else { return nil }
                let next = PostgresWriteGroup()
                value = next
                return next
            }
            if let started { return .lead(started) }
        }
    }
}

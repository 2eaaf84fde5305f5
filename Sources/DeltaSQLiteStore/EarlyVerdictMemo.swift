import DeltaCore
import DeltaSQLite
import DeltaStore

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The early verdicts one thread gave for one store since the last commit it saw: while the
/// write-ahead log's index header (`WALIndex`) is the one read before they were decided, nothing
/// was committed since, and the same question has the same answer. Each event loop keeps its own
/// (`forThisThread`), so that a `304` repeated on many connections takes no lock and makes no
/// system call: the readers' pool lock and SQLite's shared-memory lock, which every `304` took
/// before, were contended by the event loops (`perf`: 16,000 of 35,000 `futex` calls in 2 s).
final class EarlyVerdictMemo {
    /// A verdict: not modified, with the current token and digest, or nil (changed, ask the router).
    struct Entry {
        let collection: CollectionName
        let since: Since
        let current: (token: Token, digest: StateDigest)?
    }

    /// The most questions remembered at once (a user's read asks one per collection its rule reads).
    static let capacity = 8

    /// The header every entry was decided after.
    private var header: WALIndex.Header?
    private var entries: [Entry] = []

    /// The remembered verdict on `collection` since `since`, when `header` is still the one it was decided after.
    func verdict(_ collection: CollectionName, since: Since, header: WALIndex.Header) -> Entry? {
        guard header == self.header else {
            // Never again true: a header, once changed, does not come back (`WALIndex`).
            entries.removeAll(keepingCapacity: true)
            self.header = nil
            return nil
        }
        return entries.first { $0.collection == collection && $0.since == since }
    }

    /// Remembers `entry`, decided from a read that began after `header` was read.
    func remember(_ entry: Entry, after header: WALIndex.Header) {
        if header != self.header {
            self.header = header
            entries.removeAll(keepingCapacity: true)
        }
        if entries.count >= Self.capacity { entries.removeFirst() }
        entries.append(entry)
    }

    /// This thread's memo for the store numbered `store` (`SQLiteStore.memoNumber`).
    static func forThisThread(store: UInt64) -> EarlyVerdictMemo? {
        guard let key else { return nil }
        let memos: Memos
        if let value = pthread_getspecific(key) {
            memos = Unmanaged<Memos>.fromOpaque(value).takeUnretainedValue()
        } else {
            memos = Memos()
            let retained = Unmanaged.passRetained(memos)
            guard pthread_setspecific(key, retained.toOpaque()) == 0 else {
                retained.release()
                return nil
            }
        }
        if let memo = memos.byStore[store] { return memo }
        // Stores closed long ago leave their memos behind: a thread keeps a few at most.
        if memos.byStore.count >= 16 { memos.byStore.removeAll() }
        let memo = EarlyVerdictMemo()
        memos.byStore[store] = memo
        return memo
    }

    /// A thread's memos, by store.
    private final class Memos {
        var byStore: [UInt64: EarlyVerdictMemo] = [:]
    }

    /// The thread-specific slot of every thread's `Memos`, released when the thread ends; nil
    /// when the system has no slot left (then early verdicts ask SQLite each time).
    private static let key: pthread_key_t? = {
        var key = pthread_key_t()
        let status = pthread_key_create(&key) { value in
            #if canImport(Glibc)
                guard let value else { return }
            #endif
            Unmanaged<Memos>.fromOpaque(value).release()
        }
        return status == 0 ? key : nil
    }()

    /// Numbers for stores, never reused in a process (an address may be).
    static let numbers = Locked<UInt64>(0)

    /// A new store's number.
    static func nextNumber() -> UInt64 {
        numbers.withLock {
            $0 += 1
            return $0
        }
    }
}

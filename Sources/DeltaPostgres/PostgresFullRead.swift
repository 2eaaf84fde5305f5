public import DeltaCore
public import DeltaStore
import NIOConcurrencyHelpers
import PostgresNIO

extension PostgresStore {
    /// One REPEATABLE READ transaction over the full datasets of `collections`, for a snapshot.
    public func openFullRead(_ collections: [CollectionName]) async throws -> any FullRead {
        let connection = try await checkoutReader()
        do {
            try await beginRead(connection)
            var entries: [(name: CollectionName, token: Token, records: Int, digest: StateDigest)] = []
            for name in collections {
                // The same verdict as a full GET: the collection's token, or not found.
                guard case .stream(let token, .full, let digest) = try await evaluate(connection, name, .nothing) else {
                    throw StoreError(.corrupt, "store \(location)", "a full read got no full verdict", evidence: name.rawValue)
                }
                var binds = PostgresBindings()
                binds.append(name.rawValue)
                var count = 0
                for try await row in try await query(connection, "SELECT count(*) FROM deltasnap.records WHERE collection = $1 AND NOT hidden", binds) {
                    count = Int(try row.decode(Int64.self))
                }
                entries.append((name, token, count, digest))
            }
            return PostgresFullRead(connection: connection, store: self, collections: entries)
        } catch {
            await release(connection, to: readers, failed: true)
            throw failure(error)
        }
    }
}

/// Full datasets streamed from one open transaction; owns its connection until `close()`.
final class PostgresFullRead: FullRead, @unchecked Sendable {
    let collections: [(name: CollectionName, token: Token, records: Int, digest: StateDigest)]
    private let store: PostgresStore
    private let connection: NIOLockedValueBox<PostgresConnection?>
    /// Used by one task at a time, as `FullRead` requires.
    private var current: (name: CollectionName, rows: RowBatcher)?

    init(connection: PostgresConnection, store: PostgresStore, collections: [(name: CollectionName, token: Token, records: Int, digest: StateDigest)]) {
        self.connection = NIOLockedValueBox(connection)
        self.store = store
        self.collections = collections
    }

    deinit { close() }

    func next(_ collection: CollectionName, maximumBytes: Int) async throws -> RecordBatch? {
        guard let open = connection.withLockedValue({ $0 }) else { throw StoreError(.unavailable, "snapshot read", "already closed") }
        do {
            if current?.name != collection {
                current = nil  // drops the previous query's rows, if any were left
                var binds = PostgresBindings()
                binds.append(collection.rawValue)
                let rows = try await store.query(open, "SELECT hidden, body FROM deltasnap.records WHERE collection = $1 AND NOT hidden ORDER BY id", binds)
                current = (collection, RowBatcher(rows))
            }
            return try await current!.rows.next(maximumBytes: maximumBytes)
        } catch {
            throw store.failure(error)
        }
    }

    func close() {
        guard
            let open = connection.withLockedValue({ value -> PostgresConnection? in
                defer { value = nil }
                return value
            })
        else { return }
        current = nil
        store.endReadInBackground(open)
    }
}

import DeltaCore
import DeltaStore
import NIOConcurrencyHelpers
import PostgresNIO

/// A feed over an open REPEATABLE READ transaction; owns its connection until `close()`.
final class PostgresChangeFeed: ChangeFeed, @unchecked Sendable {
    let token: Token
    let digest: StateDigest
    let mode: FeedMode
    private let store: PostgresStore
    /// The connection, until closed.
    private let connection: NIOLockedValueBox<PostgresConnection?>
    /// Used by one task at a time, as `ChangeFeed` requires.
    private var rows: RowBatcher

    init(connection: PostgresConnection, rows: PostgresRowSequence, token: Token, mode: FeedMode, digest: StateDigest, store: PostgresStore) {
        self.digest = digest
        self.connection = NIOLockedValueBox(connection)
        self.rows = RowBatcher(rows)
        self.token = token
        self.mode = mode
        self.store = store
    }

    deinit { close() }

    func next(maximumBytes: Int) async throws -> RecordBatch? {
        guard connection.withLockedValue({ $0 != nil }) else { return nil }
        do {
            return try await rows.next(maximumBytes: maximumBytes)
        } catch {
            throw store.failure(error)
        }
    }

    /// Ends the transaction in the background (a response that stopped early leaves rows
    /// unread; postgres-nio discards them) and returns the connection to the pool.
    func close() {
        guard
            let open = connection.withLockedValue({ value -> PostgresConnection? in
                defer { value = nil }
                return value
            })
        else { return }
        store.endReadInBackground(open)
    }
}

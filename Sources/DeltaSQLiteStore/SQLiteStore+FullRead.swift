public import DeltaCore
import DeltaSQLite
public import DeltaStore

extension SQLiteStore {
    /// One read transaction over the full datasets of `collections`, for a snapshot.
    public func openFullRead(_ collections: [CollectionName]) async throws -> any FullRead {
        let connection = try await readers.checkout()
        do {
            let entries = try sqlite { () throws -> [(name: CollectionName, token: Token, records: Int, digest: StateDigest)] in
                try connection.statement("BEGIN").step()
                return try collections.map { name in
                    // The same verdict as a full GET: the collection's token, or not found.
                    guard case .stream(let token, .full, let digest) = try evaluate(connection, name, .nothing) else {
                        throw StoreError(.corrupt, "store \(path)", "a full read got no full verdict", evidence: name.rawValue)
                    }
                    let count = try connection.integer("SELECT count(*) FROM records WHERE collection = ? AND hidden = 0", .text(name.rawValue)) ?? 0
                    return (name, token, Int(count), digest)
                }
            }
            return SQLiteFullRead(connection: connection, store: self, collections: entries)
        } catch {
            readers.checkin(connection)
            throw error
        }
    }
}

/// Full datasets streamed from one open SQLite read transaction; owns its connection until `close()`.
final class SQLiteFullRead: FullRead, @unchecked Sendable {
    let collections: [(name: CollectionName, token: Token, records: Int, digest: StateDigest)]
    private let state: Locked<Connection?>
    private let store: SQLiteStore
    private var current: CollectionName?
    private var exhausted = false

    private static let query = "SELECT hidden, body FROM records WHERE collection = ? AND hidden = 0 ORDER BY id"

    init(connection: Connection, store: SQLiteStore, collections: [(name: CollectionName, token: Token, records: Int, digest: StateDigest)]) {
        self.state = Locked(connection)
        self.store = store
        self.collections = collections
    }

    deinit { close() }

    func next(_ collection: CollectionName, maximumBytes: Int) async throws -> RecordBatch? {
        try state.withLock { connection -> RecordBatch? in
            guard let connection else { throw StoreError(.unavailable, "snapshot read", "already closed") }
            let statement: Statement
            if current == collection {
                if exhausted { return nil }
                statement = try store.sqlite { try connection.statement(Self.query, keepingPosition: true) }
            } else {
                statement = try store.sqlite { try connection.statement(Self.query) }
                try store.sqlite { try statement.bind([.text(collection.rawValue)]) }
                current = collection
                exhausted = false
            }
            return try store.fillBatch(statement, maximumBytes: maximumBytes, exhausted: &exhausted)
        }
    }

    func close() {
        guard
            let connection = state.withLock({ value -> Connection? in
                defer { value = nil }
                return value
            })
        else { return }
        store.endRead(connection)
    }
}

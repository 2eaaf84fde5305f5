import DeltaStore
import Logging
import NIOPosix
import PostgresNIO

extension PostgresStore {
    /// Runs one statement and drains its rows, turning failures into `StoreError`s by the caller.
    static func run(_ connection: PostgresConnection, _ sql: String, logger: Logger) async throws {
        for try await _ in try await connection.query(PostgresQuery(unsafeSQL: sql), logger: logger) {}
    }

    /// Runs one statement with its parameters (`$1`, `$2`, …) and returns its rows, streamed.
    func query(_ connection: PostgresConnection, _ sql: String, _ binds: PostgresBindings = PostgresBindings()) async throws -> PostgresRowSequence {
        do {
            return try await connection.query(PostgresQuery(unsafeSQL: sql, binds: binds), logger: logger)
        } catch {
            throw failure(error)
        }
    }

    /// Runs one statement without parameters and drains its rows.
    func execute(_ connection: PostgresConnection, _ sql: String) async throws {
        do {
            try await Self.run(connection, sql, logger: logger)
        } catch {
            throw failure(error)
        }
    }

    /// A database failure as a `StoreError`, with PostgreSQL's SQLSTATE and message as evidence.
    func failure(_ error: any Error) -> any Error {
        if error is StoreError || error is CancellationError { return error }
        return StoreError(.unavailable, "store \(location)", "database call failed", evidence: Self.describe(error))
    }

    /// The SQLSTATE of a server error, when it is one.
    static func sqlState(_ error: any Error) -> String? {
        (error as? PSQLError)?.serverInfo?[.sqlState]
    }

    /// What went wrong, without the connection details postgres-nio hides from `description`.
    static func describe(_ error: any Error) -> String {
        guard let error = error as? PSQLError else { return "\(error)" }
        if let info = error.serverInfo, let message = info[.message] {
            return "\(info[.sqlState] ?? "?") \(message)"
        }
        if let underlying = error.underlying { return "\(error.code): \(underlying)" }
        return "\(error.code)"
    }

    /// Gives a connection back after use: clean ones to the pool; after a failure, one that
    /// cannot roll back cleanly is closed and its slot freed.
    func release(_ connection: PostgresConnection, to pool: ConnectionPool<PostgresConnection>, failed: Bool) async {
        if failed {
            do {
                try await Self.run(connection, "ROLLBACK", logger: logger)
            } catch {
                pool.discard(connection)
                return
            }
        }
        pool.checkin(connection)
    }

    /// A reader connection, one on the calling task's event loop when one is idle, so that its
    /// answers resume the task where they are read (`EventLoopExecutor`); new connections are
    /// opened on the caller's loop.
    func checkoutReader() async throws -> PostgresConnection {
        let loop = MultiThreadedEventLoopGroup.currentEventLoop.map(ObjectIdentifier.init)
        return try await readers.checkout(preferring: { ObjectIdentifier($0.eventLoop) == loop })
    }

    /// Runs `body` on a reader connection outside a transaction (one statement, one snapshot).
    func withReader<T>(_ body: (PostgresConnection) async throws -> T) async throws -> T {
        let connection = try await checkoutReader()
        do {
            let value = try await body(connection)
            readers.checkin(connection)
            return value
        } catch {
            await release(connection, to: readers, failed: true)
            throw failure(error)
        }
    }
}

import PostgresNIO

/// A read's transaction: `BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY` and `COMMIT`, each a
/// statement prepared once per connection. Sent as plain text, each was parsed and described
/// again on every read, on both sides: about 0.1 ms of a small delta, timed by hand when
/// this was written.
enum PostgresReadTransaction {
    private struct Begin: ControlStatement {
        static let name = "deltasnap_begin_read"
        static let sql = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"
    }

    private struct Commit: ControlStatement {
        static let name = "deltasnap_commit"
        static let sql = "COMMIT"
    }

    /// Opens the read transaction on `connection`.
    static func begin(_ connection: PostgresConnection, logger: Logger) async throws {
        for try await _ in try await connection.execute(Begin(), logger: logger) {}
    }

    /// Ends it.
    static func commit(_ connection: PostgresConnection, logger: Logger) async throws {
        for try await _ in try await connection.execute(Commit(), logger: logger) {}
    }
}

/// A statement without parameters or rows.
private protocol ControlStatement: PostgresPreparedStatement where Row == Void {}

extension ControlStatement {
    func makeBindings() throws -> PostgresBindings { PostgresBindings() }
    func decodeRow(_ row: PostgresRow) throws {}
}

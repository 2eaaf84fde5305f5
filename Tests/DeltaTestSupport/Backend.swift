import DeltaPostgres
import DeltaSQLite
import DeltaSQLiteStore
public import DeltaStore
public import Foundation
import Logging
import PostgresNIO

/// The store backends every store and server test runs against.
///
/// PostgreSQL joins when `DELTASNAP_TEST_POSTGRES` names a server whose role may create
/// databases; `Scripts/test.sh` starts one (`Scripts/postgres.sh`) and sets it. Each test gets a
/// database of its own, dropped afterwards.
public enum Backend: String, CaseIterable, Sendable, CustomStringConvertible {
    /// One SQLite file in a temporary directory.
    case sqlite
    /// A fresh database on the test PostgreSQL server.
    case postgres

    /// The backends this run can reach: SQLite always, PostgreSQL when configured.
    public static let available: [Backend] = postgresServer == nil ? [.sqlite] : [.sqlite, .postgres]

    /// The test PostgreSQL server's URL (its `postgres` database), from the environment.
    public static let postgresServer: String? = {
        let value = ProcessInfo.processInfo.environment["DELTASNAP_TEST_POSTGRES"] ?? ""
        return value.isEmpty ? nil : value
    }()

    /// The backend's name.
    public var description: String { rawValue }

    /// Creates an empty database for this backend in `directory` (SQLite) or on the server
    /// (PostgreSQL) and returns what `--db` takes to reach it; `remove` drops it.
    public func makeDatabase(in directory: URL) async throws -> TestDatabase {
        switch self {
        case .sqlite:
            return TestDatabase(location: directory.appendingPathComponent("store.sqlite").path, backend: self)
        case .postgres:
            guard let server = Self.postgresServer else {
                throw TestFailure("DELTASNAP_TEST_POSTGRES is not set: run Scripts/test.sh, which starts a PostgreSQL server")
            }
            let name = "deltasnap_test_\(UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: ""))"
            try await Self.admin(server, "CREATE DATABASE \(name)")
            let location = server.replacingOccurrences(of: "/postgres?", with: "/\(name)?")
            return TestDatabase(location: location, backend: self, databaseName: name)
        }
    }

    /// A fresh, empty store, closed and removed after `body`; `body` also gets a scratch directory.
    public func withStore<T>(_ body: (any ChangeStore & EarlyVerdicts, URL) async throws -> T) async throws -> T {
        try await withDatabase { _, store, directory in try await body(store, directory) }
    }

    /// As `withStore`, with the database too, to read or change it behind the store's back.
    public func withDatabase<T>(_ body: (TestDatabase, any ChangeStore & EarlyVerdicts, URL) async throws -> T) async throws -> T {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("deltastore-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let database = try await makeDatabase(in: directory)
        let store = try await database.open()
        do {
            let value = try await body(database, store, directory)
            try await store.close()
            await database.remove()
            return value
        } catch {
            try? await store.close()
            await database.remove()
            throw error
        }
    }

    /// Runs one statement on the server's `postgres` database.
    static func admin(_ server: String, _ sql: String) async throws {
        _ = try await withConnection(server) { connection, logger in
            try await connection.query(PostgresQuery(unsafeSQL: sql), logger: logger)
        }
    }

    /// Runs `body` on a plain connection to the database `url` names.
    static func withConnection<T>(_ url: String, _ body: (PostgresConnection, Logger) async throws -> T) async throws -> T {
        var logger = Logger(label: "deltasnap.tests")
        logger.logLevel = .critical
        let configuration = try PostgresLocation(url: url).configuration()
        let connection = try await PostgresConnection.connect(configuration: configuration, id: 0, logger: logger)
        do {
            let value = try await body(connection, logger)
            try await connection.close()
            return value
        } catch {
            try? await connection.close()
            throw error
        }
    }
}

/// One record as stored, read from the backend's own table.
public struct StoredRow: Sendable, Equatable {
    /// Whether it is a tombstone.
    public let hidden: Bool
    /// The position of its last change.
    public let position: Int64
    /// Its canonical body.
    public let body: String
}

/// One empty test database: where it is, and how to open and drop it.
public struct TestDatabase: Sendable {
    /// What `deltasnap --db` takes: a file path or a `postgres://` URL.
    public let location: String
    /// Its backend.
    public let backend: Backend
    /// The PostgreSQL database's name.
    var databaseName: String?

    init(location: String, backend: Backend, databaseName: String? = nil) {
        self.location = location
        self.backend = backend
        self.databaseName = databaseName
    }

    /// Opens the store (small pools, so that parallel tests stay under the server's connection limit).
    public func open(newDatabaseID: UInt64? = nil) async throws -> any ChangeStore & EarlyVerdicts {
        switch backend {
        case .sqlite:
            var configuration = SQLiteStore.Configuration()
            configuration.newDatabaseID = newDatabaseID
            return try SQLiteStore(path: location, configuration: configuration)
        case .postgres:
            var configuration = PostgresStore.Configuration()
            configuration.maximumReaders = 6
            configuration.maximumWriters = 2
            configuration.newDatabaseID = newDatabaseID
            return try await PostgresStore.open(try PostgresLocation(url: location), configuration: configuration)
        }
    }

    /// Runs SQL on the database directly, behind the store's back (to age or damage it in tests).
    /// PostgreSQL's tables are in the schema `deltasnap`; the statements run with it on the search path.
    public func execute(_ statements: String...) async throws {
        switch backend {
        case .sqlite:
            let connection = try Connection(path: location)
            for sql in statements { try connection.execute(sql) }
        case .postgres:
            try await Backend.withConnection(location) { connection, logger in
                try await connection.query("SET search_path TO deltasnap", logger: logger)
                for sql in statements { try await connection.query(PostgresQuery(unsafeSQL: sql), logger: logger) }
            }
        }
    }

    /// The first column of each row `sql` returns, as text, read directly from the database.
    public func lines(_ sql: String) async throws -> [String] {
        var lines: [String] = []
        switch backend {
        case .sqlite:
            let statement = try Connection(path: location).statement(sql)
            while try statement.step() { lines.append(statement.string(0)) }
        case .postgres:
            try await Backend.withConnection(location) { connection, logger in
                for try await row in try await connection.query(PostgresQuery(unsafeSQL: sql), logger: logger) {
                    lines.append(try row.decode(String.self))
                }
            }
        }
        return lines
    }

    /// Every record of `collection` as stored, hidden ones included: id → row.
    public func storedRecords(_ collection: String) async throws -> [String: StoredRow] {
        var rows: [String: StoredRow] = [:]
        switch backend {
        case .sqlite:
            let statement = try Connection(path: location).statement("SELECT id, hidden, position, body FROM records WHERE collection = ?")
            try statement.bind([.text(collection)])
            while try statement.step() {
                rows[statement.string(0)] = StoredRow(hidden: statement.int64(1) != 0, position: statement.int64(2), body: statement.string(3))
            }
        case .postgres:
            try await Backend.withConnection(location) { connection, logger in
                let query: PostgresQuery = "SELECT id, hidden, position, convert_from(body, 'UTF8') FROM deltasnap.records WHERE collection = \(collection)"
                for try await row in try await connection.query(query, logger: logger) {
                    let (id, hidden, position, body) = try row.decode((String, Bool, Int64, String).self)
                    rows[id] = StoredRow(hidden: hidden, position: position, body: body)
                }
            }
        }
        return rows
    }

    /// Drops the PostgreSQL database (SQLite files go with their directory).
    public func remove() async {
        guard let databaseName, let server = Backend.postgresServer else { return }
        try? await Backend.admin(server, "DROP DATABASE IF EXISTS \(databaseName) WITH (FORCE)")
    }
}

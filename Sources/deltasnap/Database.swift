import DeltaPostgres
import DeltaSQLiteStore
import DeltaStore
import Foundation

/// What `--db` names: a SQLite file (the embedded default) or a PostgreSQL database.
enum Database: CustomStringConvertible {
    /// A SQLite file, created when missing.
    case sqlite(path: String)
    /// A PostgreSQL database, from a `postgres://` URL.
    case postgres(PostgresLocation)

    /// The help text every `--db` option shares.
    static let help =
        "The database: a SQLite file (created when missing) or postgres://USER@HOST[:PORT]/DATABASE "
        + "(password from $PGPASSWORD; ?sslmode=disable|prefer|require)."

    /// Parses `--db`.
    init(_ text: String) throws {
        if PostgresLocation.matches(text) {
            do { self = .postgres(try PostgresLocation(url: text)) } catch let error as StoreError { throw CommandFailure(error.description) }
        } else {
            self = .sqlite(path: text)
        }
    }

    /// The database for messages: the path, or the URL without its password.
    var description: String {
        switch self {
        case .sqlite(let path): path
        case .postgres(let location): location.description
        }
    }

    /// Opens the store (creating its schema when missing); `newDatabaseID` fixes the identity of a new database.
    /// `blobDirectory` overrides where a SQLite store keeps blobs (`--blobs`); PostgreSQL keeps
    /// them in the database, so that every instance serves them.
    func open(newDatabaseID: UInt64? = nil, blobDirectory: String? = nil) async throws -> any ChangeStore & EarlyVerdicts {
        switch self {
        case .sqlite(let path):
            var configuration = SQLiteStore.Configuration()
            configuration.newDatabaseID = newDatabaseID
            configuration.blobDirectory = blobDirectory
            return try SQLiteStore(path: path, configuration: configuration)
        case .postgres where blobDirectory != nil:
            throw CommandFailure("--blobs: a PostgreSQL database keeps its blobs itself, so that every server shares them; drop --blobs")
        case .postgres(let location):
            var configuration = PostgresStore.Configuration()
            configuration.newDatabaseID = newDatabaseID
            return try await PostgresStore.open(location, configuration: configuration)
        }
    }
}

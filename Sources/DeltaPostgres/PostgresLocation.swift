import DeltaStore
import Foundation
import NIOSSL
public import PostgresNIO

/// Where a PostgreSQL store lives, parsed from a `postgres://` URL:
/// `postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE[?sslmode=disable|prefer|require]`.
///
/// With no password in the URL, `PGPASSWORD` from the environment is used, so that a secret
/// need not appear in a command line.
public struct PostgresLocation: Sendable, CustomStringConvertible {
    /// How the connection uses TLS, as libpq's `sslmode` names it.
    public enum TLSMode: String, Sendable, CaseIterable {
        /// Plain TCP.
        case disable
        /// TLS when the server offers it, plain TCP otherwise (the default, as in libpq).
        case prefer
        /// TLS or no connection.
        case require
    }

    /// The server's host name or address.
    public var host: String
    /// The server's port. Default 5432.
    public var port: Int
    /// The role to log in as.
    public var username: String
    /// The role's password, when the server asks for one.
    public var password: String?
    /// The database holding the store.
    public var database: String
    /// TLS use. Default `prefer`.
    public var tls: TLSMode

    /// Whether `text` names a PostgreSQL database (a `postgres://` or `postgresql://` URL) rather than a file.
    public static func matches(_ text: String) -> Bool {
        text.hasPrefix("postgres://") || text.hasPrefix("postgresql://")
    }

    /// Parses a `postgres://` URL; `environment` supplies `PGPASSWORD` when the URL has no password.
    public init(url text: String, environment: [String: String] = ProcessInfo.processInfo.environment) throws {
        func refuse(_ reason: String) -> StoreError {
            StoreError(.unavailable, "database URL \(PostgresLocation.redacted(text))", reason)
        }
        guard Self.matches(text), let url = URLComponents(string: text) else {
            throw refuse("not a postgres:// URL")
        }
        guard let host = url.host, !host.isEmpty else { throw refuse("has no host") }
        guard let user = url.user, !user.isEmpty else { throw refuse("has no user name") }
        let database = String(url.path.drop(while: { $0 == "/" }))
        guard !database.isEmpty, !database.contains("/") else { throw refuse("has no database name (…/DATABASE)") }
        var tls = TLSMode.prefer
        for item in url.queryItems ?? [] {
            guard item.name == "sslmode", let value = item.value, let mode = TLSMode(rawValue: value) else {
                throw refuse("unsupported parameter \(item.name)=\(item.value ?? ""); only sslmode=disable|prefer|require is understood")
            }
            tls = mode
        }
        self.host = host
        self.port = url.port ?? 5432
        self.username = url.user?.removingPercentEncoding ?? user
        self.password = url.password?.removingPercentEncoding ?? environment["PGPASSWORD"]
        self.database = database.removingPercentEncoding ?? database
        self.tls = tls
    }

    /// The URL with the password left out, for logs and errors.
    public var description: String { "postgres://\(username)@\(host):\(port)/\(database)" }

    /// `text` with any password replaced by `***`.
    static func redacted(_ text: String) -> String {
        guard var url = URLComponents(string: text), url.password != nil else { return text }
        url.password = "***"
        return url.string ?? "postgres://…"
    }

    /// The connection settings for postgres-nio.
    public func configuration() throws -> PostgresConnection.Configuration {
        let mode: PostgresConnection.Configuration.TLS
        switch tls {
        case .disable:
            mode = .disable
        case .prefer, .require:
            let context = try NIOSSLContext(configuration: .makeClientConfiguration())
            mode = tls == .prefer ? .prefer(context) : .require(context)
        }
        return PostgresConnection.Configuration(host: host, port: port, username: username, password: password, database: database, tls: mode)
    }
}

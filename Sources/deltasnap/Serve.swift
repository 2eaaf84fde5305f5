import ArgumentParser
import DeltaServer
import DeltaStore
import Foundation
import Hummingbird
import Logging

/// `deltasnap serve`: the HTTP delta server.
struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run the HTTP delta server.",
        discussion: """
            Serves GET /api/<collection> (full dataset or delta, 304, 409 reset signal), \
            PUT|DELETE /api/<collection>/<id> and POST /api/<collection> (writes, need the \
            write token), GET /healthz and GET /metrics (Prometheus text).

            Binds to 127.0.0.1 unless --host says otherwise. Without a write token the server is \
            read-only. Prefer DELTASNAP_WRITE_TOKEN to --write-token: command lines are visible to \
            other users of the machine. Stops gracefully on SIGTERM or SIGINT.

            Several servers can share one PostgreSQL database behind a load balancer; a token \
            from one is honoured by all of them:
              PGPASSWORD=... deltasnap serve --db postgres://deltasnap@db.internal/deltasnap
            """
    )

    @Option(help: ArgumentHelp(Database.help, valueName: "database"))
    var db = "deltasnap.sqlite"

    @Option(help: ArgumentHelp("The address to bind: 127.0.0.1 (loopback) by default, 0.0.0.0 for every interface.", valueName: "address"))
    var host = "127.0.0.1"

    @Option(help: ArgumentHelp("The TCP port; 0 picks a free one (printed on start).", valueName: "port"))
    var port = 8080

    @Option(help: ArgumentHelp("The bearer secret writes must present (default: $DELTASNAP_WRITE_TOKEN; none = read-only).", valueName: "secret"))
    var writeToken: String?

    @Option(help: ArgumentHelp("The largest request body accepted, in bytes.", valueName: "bytes"))
    var maxBodyBytes = 32 << 20

    @Option(help: ArgumentHelp("Log level: trace, debug, info, notice, warning, error, critical.", valueName: "level"))
    var logLevel = "info"

    func validate() throws {
        guard (0...65535).contains(port) else { throw ValidationError("--port must be between 0 and 65535 (got \(port))") }
        guard maxBodyBytes > 0 else { throw ValidationError("--max-body-bytes must be positive (got \(maxBodyBytes))") }
        guard Logger.Level(rawValue: logLevel) != nil else { throw ValidationError("--log-level: unknown level \(logLevel)") }
        if let writeToken, writeToken.count < 8 { throw ValidationError("--write-token must be at least 8 characters") }
    }

    func run() async throws {
        let level = Logger.Level(rawValue: logLevel) ?? .info
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
        let logger = Logger(label: "deltasnap")
        var configuration = ServerConfiguration()
        configuration.host = host
        configuration.port = port
        configuration.maximumBodyBytes = maxBodyBytes
        configuration.writeToken = writeToken ?? ProcessInfo.processInfo.environment["DELTASNAP_WRITE_TOKEN"].flatMap { $0.isEmpty ? nil : $0 }
        let location = try Database(db)
        let store = try await location.open()
        let database = location.description
        let host = configuration.host
        let writable = configuration.writeToken != nil
        let app = buildApplication(store: store, configuration: configuration, logger: logger) { port in
            // One line on stdout that scripts and tests wait for; logs go to stderr.
            let line = "deltasnap: serving \(database) on http://\(host):\(port) (\(writable ? "writes enabled" : "read-only"))\n"
            FileHandle.standardOutput.write(Data(line.utf8))
        }
        try await app.runService()
        try await store.close()
    }
}

import DeltaCore
public import DeltaStore
import Foundation
public import Logging
import NIOConcurrencyHelpers
import NIOPosix
import PostgresNIO

/// The `ChangeStore` on PostgreSQL, so that several `deltasnap serve` processes share one dataset.
///
/// Layout, in the schema `deltasnap`: `meta` (identity, schema version), `commits` (one row per
/// position, with its tag), `records` (collection, id, position, hidden, canonical body), the
/// same as the SQLite store. Writers, on every instance, take one transaction-scoped advisory
/// lock before they read the head, so positions are handed out and become visible strictly in
/// order (docs/PROTOCOL.md, "Several servers, one database").
public final class PostgresStore: ChangeStore {
    /// Settings, with defaults that suit a server.
    public struct Configuration: Sendable {
        /// Most read connections open at once (streaming responses each hold one). Default 16.
        public var maximumReaders = 16
        /// Most write connections open at once; writers queue on one lock, so a few suffice. Default 4.
        public var maximumWriters = 4
        /// The identity to give a database this open creates (nil: random). An existing database
        /// with another identity is refused. For reproducible demo and test data only.
        public var newDatabaseID: UInt64?
        /// Where postgres-nio logs. Default: warnings and worse, under `deltasnap.postgres`.
        public var logger: Logger = {
            var logger = Logger(label: "deltasnap.postgres")
            logger.logLevel = .warning
            return logger
        }()

        /// The defaults.
        public init() {}
    }

    /// The schema version this build writes and reads.
    public static let schemaVersion = 1
    /// The advisory lock every write transaction and every schema migration takes ("deltasna").
    static let writeLock = Int64(bitPattern: 0x6465_6C74_6173_6E61)

    /// The database's random identity.
    public let databaseID: UInt64
    /// Where the database is (without its password).
    public let location: PostgresLocation
    let logger: Logger
    let writers: ConnectionPool<PostgresConnection>
    let readers: ConnectionPool<PostgresConnection>
    /// The first look of concurrent reads, answered by one statement (`quickVerdict`).
    let verdicts = VerdictBatch()
    /// The `$rows` sources' key indexes the database has (`PostgresStore+RowsKeys`), as
    /// `collection` + newline + member; set by `installRules`.
    let keyIndexes = NIOLockedValueBox(Set<String>())
    /// The group of writes this instance is committing together (`PostgresWriteGroup`).
    let writeGroups = PostgresWriteGroups()

    /// Connects to the database at `location`, creating or checking the schema.
    public static func open(_ location: PostgresLocation, configuration: Configuration = Configuration()) async throws -> PostgresStore {
        let settings: PostgresConnection.Configuration
        do {
            settings = try location.configuration()
        } catch {
            throw StoreError(.unavailable, "store \(location)", "cannot set up TLS", evidence: "\(error)")
        }
        let logger = configuration.logger
        let ids = NIOLockedValueBox(0)
        let connect: @Sendable () async throws -> PostgresConnection = {
            let id = ids.withLockedValue { value -> Int in
                value += 1
                return value
            }
            do {
                // On the caller's loop when it is one of the shared group's (`checkoutReader`);
                // a loop of another group may be shut down while the pool keeps the connection.
                let group = PostgresConnection.defaultEventLoopGroup
                let current = MultiThreadedEventLoopGroup.currentEventLoop
                let loop = group.makeIterator().first { $0 === current } ?? group.any()
                return try await PostgresConnection.connect(on: loop, configuration: settings, id: id, logger: logger)
            } catch {
                throw StoreError(.unavailable, "store \(location)", "cannot connect", evidence: PostgresStore.describe(error))
            }
        }
        let first = try await connect()
        let databaseID: UInt64
        do {
            databaseID = try await migrate(first, location: location, newID: configuration.newDatabaseID, logger: logger)
            try? await first.close()
        } catch {
            try? await first.close()
            throw error
        }
        return PostgresStore(location: location, databaseID: databaseID, logger: logger, configuration: configuration, connect: connect)
    }

    private init(
        location: PostgresLocation, databaseID: UInt64, logger: Logger, configuration: Configuration,
        connect: @escaping @Sendable () async throws -> PostgresConnection
    ) {
        self.location = location
        self.databaseID = databaseID
        self.logger = logger
        writers = ConnectionPool(maximum: max(1, configuration.maximumWriters)) {
            let connection = try await connect()
            do {
                try await PostgresStore.prepareWriter(connection, logger: logger)
            } catch {
                try? await connection.close()
                throw error
            }
            return connection
        } retire: {
            PostgresStore.retire($0)
        }
        readers = ConnectionPool(maximum: max(1, configuration.maximumReaders), open: connect, retire: { PostgresStore.retire($0) })
    }

    /// Closes a connection the pools let go of, keeping it alive until it has closed.
    private static func retire(_ connection: PostgresConnection) {
        connection.close().whenComplete { _ in withExtendedLifetime(connection) {} }
    }

    /// Each writer connection keeps the ids each write of its transactions claimed, by the
    /// write's claim key (`PostgresWriteTransaction.claim`), in a temporary table: a second
    /// write to one id in one commit is refused. The table is not emptied at each commit (`ON
    /// COMMIT DELETE ROWS` truncated its files inside the write lock at every commit, and a
    /// truncation waits for the file system's journal, which the WAL's flushes keep busy); a
    /// failed write's claims go with its rollback, and the rest are swept now and then, before a
    /// transaction (`PostgresWriteGroups.sweep`).
    ///
    /// A writer's prepared statements (the upsert, the hide, a record's read) are planned once,
    /// for any parameters (`plan_cache_mode`). Planned for each call, the upsert's lookup by
    /// (collection, id) walked the whole collection by `records_by_position` whenever the
    /// statistics were older than the collection's growth (they said one row). Readers keep
    /// plans made for each call: their delta statements need the position asked for (a generic
    /// plan counted changes by scanning the table: 109 deltas/s instead of 1,300).
    private static func prepareWriter(_ connection: PostgresConnection, logger: Logger) async throws {
        try await run(connection, "SET plan_cache_mode = force_generic_plan", logger: logger)
        try await run(
            connection, #"CREATE TEMP TABLE IF NOT EXISTS written(claim bigint, id text COLLATE "C", PRIMARY KEY (claim, id))"#, logger: logger)
    }

    /// The newest committed position (0 when the database is empty).
    public func headPosition() async throws -> UInt64 {
        try await withReader { connection in
            let rows = try await self.query(connection, "SELECT coalesce(max(position), 0) FROM deltasnap.commits")
            for try await row in rows { return UInt64(clamping: try row.decode(Int64.self)) }
            return 0
        }
    }

    /// True: every call awaits PostgreSQL over the network, on SwiftNIO event loops.
    public var runsOnEventLoops: Bool { true }

    /// Closes every idle connection; connections in use close when they come back.
    public func close() async throws {
        writers.close()
        readers.close()
    }
}

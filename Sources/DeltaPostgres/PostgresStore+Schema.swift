import DeltaStore
import Logging
import PostgresNIO

extension PostgresStore {
    /// The tables, in the schema `deltasnap`. Ids and collection names sort by their bytes
    /// (`COLLATE "C"`), as SQLite sorts them, so both backends stream records in the same order.
    static let schema = [
        "CREATE SCHEMA IF NOT EXISTS deltasnap",
        "CREATE TABLE IF NOT EXISTS deltasnap.meta(key text PRIMARY KEY, value text NOT NULL)",
        "CREATE TABLE IF NOT EXISTS deltasnap.commits(position bigint PRIMARY KEY, tag bigint NOT NULL, committed_at bigint NOT NULL)",
        """
        CREATE TABLE IF NOT EXISTS deltasnap.records(
            collection text COLLATE "C" NOT NULL, id text COLLATE "C" NOT NULL, position bigint NOT NULL,
            hidden boolean NOT NULL, body bytea NOT NULL, PRIMARY KEY (collection, id))
        """,
        "CREATE INDEX IF NOT EXISTS records_by_position ON deltasnap.records(collection, position)",
        "CREATE TABLE IF NOT EXISTS deltasnap.push_clients(client text PRIMARY KEY, last_mutation bigint NOT NULL)",
        """
        CREATE TABLE IF NOT EXISTS deltasnap.push_runs(
            client text NOT NULL, first bigint NOT NULL, last bigint NOT NULL, digests bytea NOT NULL, results bytea NOT NULL,
            PRIMARY KEY (client, first))
        """,
        """
        CREATE TABLE IF NOT EXISTS deltasnap.push_writers(
            collection text COLLATE "C" NOT NULL, id text COLLATE "C" NOT NULL, client text NOT NULL, position bigint NOT NULL,
            PRIMARY KEY (collection, id))
        """,
        // Superseded versions, for exact selection deltas (see `SelectionFeed`).
        """
        CREATE TABLE IF NOT EXISTS deltasnap.superseded(
            collection text COLLATE "C" NOT NULL, id text COLLATE "C" NOT NULL, position bigint NOT NULL,
            hidden boolean NOT NULL, body bytea NOT NULL, PRIMARY KEY (collection, id, position))
        """,
        """
        CREATE OR REPLACE FUNCTION deltasnap.keep_superseded() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF OLD.position <> NEW.position THEN
                INSERT INTO deltasnap.superseded VALUES (OLD.collection, OLD.id, OLD.position, OLD.hidden, OLD.body)
                ON CONFLICT (collection, id, position) DO UPDATE SET hidden = EXCLUDED.hidden, body = EXCLUDED.body;
            END IF;
            RETURN NEW;
        END $$
        """,
        """
        DO $$ BEGIN
            IF NOT EXISTS (SELECT 1 FROM pg_trigger WHERE tgname = 'records_superseded') THEN
                CREATE TRIGGER records_superseded BEFORE UPDATE ON deltasnap.records
                FOR EACH ROW EXECUTE FUNCTION deltasnap.keep_superseded();
            END IF;
        END $$
        """,
        """
        INSERT INTO deltasnap.meta(key, value) SELECT 'history_since', coalesce(max(position), 0)::text FROM deltasnap.commits
        ON CONFLICT (key) DO NOTHING
        """,
        // Each collection's state digest (see `PostgresStore+Digest`).
        "CREATE TABLE IF NOT EXISTS deltasnap.digests(collection text COLLATE \"C\" PRIMARY KEY, digest bytea NOT NULL, records bigint NOT NULL)",
        // The tokens of snapshots baked from this database (see `Compaction`).
        """
        CREATE TABLE IF NOT EXISTS deltasnap.baked(
            collection text COLLATE "C" NOT NULL, position bigint NOT NULL, etag text NOT NULL, baked_at bigint NOT NULL,
            PRIMARY KEY (collection, position, etag))
        """,
        // Which principal each push client belongs to (the first that pushed with it: `owner`,
        // `client` or `user:<sub>`; `client_owners`, users' alone by bare `sub`, came first and is
        // still read), and what each applied mutation did.
        "CREATE TABLE IF NOT EXISTS deltasnap.client_owners(client text PRIMARY KEY, \"user\" text NOT NULL)",
        "CREATE TABLE IF NOT EXISTS deltasnap.client_principals(client text PRIMARY KEY, principal text NOT NULL)",
        """
        CREATE TABLE IF NOT EXISTS deltasnap.mutation_log(
            position bigint NOT NULL, collection text COLLATE "C" NOT NULL, id text COLLATE "C" NOT NULL, "user" text, client text NOT NULL,
            mutation bigint NOT NULL, operation text NOT NULL, logged_at bigint NOT NULL)
        """,
        "CREATE INDEX IF NOT EXISTS mutation_log_by_record ON deltasnap.mutation_log(collection, id, position)",
        // The console's latest mutations, newest first (`StoreInspection.recentMutations`).
        "CREATE INDEX IF NOT EXISTS mutation_log_by_position ON deltasnap.mutation_log(position)",
        // The rules of `deltasnap serve --rules`, one version per file that differed (see `PostgresStore+Rules`).
        "CREATE TABLE IF NOT EXISTS deltasnap.rules(version bigint PRIMARY KEY, digest text NOT NULL, body bytea NOT NULL, installed_at bigint NOT NULL)",
        // Blobs stored whole (`stored_at`: the next commit's position then), their bytes in parts of 1 MiB,
        // and which blobs each record's current version references (see `PostgresStore+Blobs`).
        """
        CREATE TABLE IF NOT EXISTS deltasnap.blobs(
            hash text COLLATE "C" PRIMARY KEY, size bigint NOT NULL, type text NOT NULL, stored_at bigint NOT NULL)
        """,
        """
        CREATE TABLE IF NOT EXISTS deltasnap.blob_parts(
            hash text COLLATE "C" NOT NULL, part integer NOT NULL, bytes bytea NOT NULL, PRIMARY KEY (hash, part))
        """,
        """
        CREATE TABLE IF NOT EXISTS deltasnap.blob_refs(
            hash text COLLATE "C" NOT NULL, collection text COLLATE "C" NOT NULL, id text COLLATE "C" NOT NULL,
            PRIMARY KEY (hash, collection, id))
        """,
        // Out of line and never compressed: a photo does not compress, and a range of an
        // uncompressed value is read without reading the rest of it.
        "ALTER TABLE deltasnap.blob_parts ALTER COLUMN bytes SET STORAGE EXTERNAL",
        "CREATE INDEX IF NOT EXISTS blob_refs_by_record ON deltasnap.blob_refs(collection, id)",
        // Which users uploaded each blob: a user may reference only blobs whose bytes they had.
        "CREATE TABLE IF NOT EXISTS deltasnap.blob_uploaders(hash text COLLATE \"C\" NOT NULL, \"user\" text NOT NULL, PRIMARY KEY (hash, \"user\"))",
        // A record's new body or its removal drops the references of the version it had; the
        // writes then add the new body's. Hiding leaves the body, and so the references, alone.
        """
        CREATE OR REPLACE FUNCTION deltasnap.drop_blob_refs() RETURNS trigger LANGUAGE plpgsql AS $fn$
        BEGIN
            DELETE FROM deltasnap.blob_refs WHERE collection = OLD.collection AND id = OLD.id;
            RETURN NULL;
        END $fn$
        """,
        """
        DO $do$ BEGIN
            IF NOT EXISTS (SELECT 1 FROM pg_trigger WHERE tgname = 'records_blob_refs' AND tgrelid = 'deltasnap.records'::regclass) THEN
                CREATE TRIGGER records_blob_refs AFTER UPDATE OF body OR DELETE ON deltasnap.records
                FOR EACH ROW WHEN (position('"$blob"'::bytea IN OLD.body) > 0) EXECUTE FUNCTION deltasnap.drop_blob_refs();
            END IF;
        END $do$
        """,
        PostgresReadOpening.function,
        PostgresPublicOpening.function,
        keyFunction,
        PostgresWriteGroup.headFunction,
        PostgresWriteGroup.digestFunction,
    ]

    /// Creates or checks the schema under the write lock (several instances may start at once)
    /// and returns the database identity.
    static func migrate(_ connection: PostgresConnection, location: PostgresLocation, newID: UInt64?, logger: Logger) async throws -> UInt64 {
        let what = "store \(location)"
        do {
            try await run(connection, "BEGIN", logger: logger)
            try await run(connection, "SELECT pg_advisory_xact_lock(\(writeLock))", logger: logger)
            for statement in schema { try await run(connection, statement, logger: logger) }
            try await computeDigests(connection, logger: logger)
            if let version = try await meta(connection, "schema_version", logger: logger) {
                guard Int(version) == schemaVersion else {
                    throw StoreError(
                        .incompatible, what, "schema version \(version) is not supported by this build", evidence: "this build reads version \(schemaVersion)")
                }
            } else {
                try await setMeta(connection, "schema_version", String(schemaVersion), logger: logger)
            }
            let id: UInt64
            if let stored = try await meta(connection, "database_id", logger: logger) {
                guard let existing = UInt64(stored, radix: 16) else {
                    throw StoreError(.incompatible, what, "holds a database identity this build cannot read", evidence: stored)
                }
                if let newID, newID != existing {
                    throw StoreError(
                        .incompatible, what, "exists with another database identity",
                        evidence: "\(String(existing, radix: 16)), asked for \(String(newID, radix: 16))")
                }
                id = existing
            } else {
                var fresh = newID ?? 0
                while fresh == 0 { fresh = UInt64.random(in: .min ... .max) }
                try await setMeta(connection, "database_id", String(fresh, radix: 16), logger: logger)
                id = fresh
            }
            try await run(connection, "COMMIT", logger: logger)
            return id
        } catch let error as StoreError {
            try? await run(connection, "ROLLBACK", logger: logger)
            throw error
        } catch {
            throw StoreError(.unavailable, what, "cannot create or check the schema", evidence: describe(error))
        }
    }

    private static func meta(_ connection: PostgresConnection, _ key: String, logger: Logger) async throws -> String? {
        for try await row in try await connection.query("SELECT value FROM deltasnap.meta WHERE key = \(key)", logger: logger) {
            return try row.decode(String.self)
        }
        return nil
    }

    private static func setMeta(_ connection: PostgresConnection, _ key: String, _ value: String, logger: Logger) async throws {
        try await connection.query("INSERT INTO deltasnap.meta(key, value) VALUES (\(key), \(value))", logger: logger)
    }
}

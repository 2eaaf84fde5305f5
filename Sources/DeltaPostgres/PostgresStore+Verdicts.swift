public import DeltaCore
public import DeltaStore
import PostgresNIO

extension PostgresStore: EarlyVerdicts {
    /// The facts `evaluate` reads for one question, for many questions at once: one statement,
    /// so one snapshot (without the count of changed records, which the first look never asks).
    private static let batchSQL = """
        SELECT q.i,
               (SELECT coalesce(max(position), 0) FROM deltasnap.commits),
               (SELECT value::bigint FROM deltasnap.meta WHERE key = 'horizon'),
               (SELECT max(position) FROM deltasnap.records WHERE collection = q.c),
               (SELECT tag FROM deltasnap.commits WHERE position = (SELECT max(position) FROM deltasnap.records WHERE collection = q.c)),
               (SELECT tag FROM deltasnap.commits WHERE position = q.p),
               (SELECT digest FROM deltasnap.digests WHERE collection = q.c),
               (SELECT records FROM deltasnap.digests WHERE collection = q.c)
        FROM unnest($1::text[], $2::bigint[]) WITH ORDINALITY AS q(c, p, i)
        """

    /// `batchSQL`, prepared once per connection: sent with its parameters, it was parsed and
    /// planned for every batch, 0.38 ms of PostgreSQL's 0.48 ms for one question
    /// (`pgbench -M extended` against `-M prepared`, 0.10 ms). One instance's `304`s are not
    /// bound by it (measured: the same rate, one instance or three, within the noise); the
    /// database, which every instance shares, does less work for each batch.
    private struct BatchStatement: PostgresPreparedStatement {
        static let name = "deltasnap_verdict_batch"
        static let sql = batchSQL
        typealias Row = PostgresRow
        let collections: [String], positions: [Int64]

        func makeBindings() throws -> PostgresBindings {
            var binds = PostgresBindings(capacity: 2)
            binds.append(collections)
            binds.append(positions)
            return binds
        }

        func decodeRow(_ row: PostgresRow) throws -> Row { row }
    }

    /// A verdict that needs no records (`304` or a rejection), from `verdicts`, the batch every
    /// concurrent read joins; nil when the answer needs a read transaction.
    func quickVerdict(_ collection: CollectionName, _ since: Since) async throws -> ReadResult? {
        if case .answer(let result) = try await verdict(collection, since: since, client: nil).verdict { return result }
        return nil
    }

    /// The verdict alone: without a client, from the shared statement; with one, in a transaction
    /// that also reads its last mutation id (one snapshot for both).
    public func verdict(_ collection: CollectionName, since: Since, client: String?) async throws -> (verdict: ReadVerdict, lastMutation: UInt64?) {
        guard let client else {
            let key = VerdictBatch.Key(collection: collection.rawValue, position: ReadVerdict.askedPosition(since))
            let facts = try await verdicts.facts(key) { keys in try await self.batchFacts(keys) }
            return (try ReadVerdict.decide(collection, since: since, database: databaseID, facts: facts, store: location.description), nil)
        }
        let connection = try await checkoutReader()
        do {
            try await beginRead(connection)
            let verdict = try await evaluate(connection, collection, since, counting: false)
            let last = try await lastMutation(connection, client)
            try await PostgresReadTransaction.commit(connection, logger: logger)
            readers.checkin(connection)
            return (verdict, last)
        } catch {
            await release(connection, to: readers, failed: true)
            throw failure(error)
        }
    }

    /// A `304` for the HTTP layer's early path: always one round trip, the statement shared with
    /// every read waiting for one (`VerdictBatch`), without a task per question.
    public func earlyVerdict(_ collection: CollectionName, since: Since) -> EarlyVerdict {
        guard since != .nothing else { return .unknown }
        let key = VerdictBatch.Key(collection: collection.rawValue, position: ReadVerdict.askedPosition(since))
        let database = databaseID
        let store = location.description
        return .ask { reply in
            self.verdicts.facts(key, run: { keys in try await self.batchFacts(keys) }) { result in
                guard case .success(let facts) = result,
                    case .answer(.notModified(let token, let digest)) = try? ReadVerdict.decide(
                        collection, since: since, database: database, facts: facts, store: store)
                else { return reply(nil) }
                reply((token, digest))
            }
        }
    }

    /// Runs `batchSQL` for `keys` on one reader connection.
    private func batchFacts(_ keys: [VerdictBatch.Key]) async throws -> [VerdictBatch.Key: ReadVerdict.Facts] {
        let connection = try await checkoutReader()
        do {
            let statement = BatchStatement(collections: keys.map(\.collection), positions: keys.map { Int64(clamping: $0.position) })
            var answers: [VerdictBatch.Key: ReadVerdict.Facts] = [:]
            for try await row in try await connection.execute(statement, logger: logger) {
                let (index, head, horizon, collectionHead, collectionTag, askedTag, stored, visible) = try row.decode(
                    (Int64, Int64, Int64?, Int64?, Int64?, Int64?, ByteBuffer?, Int64?).self)
                guard index >= 1, index <= keys.count else { continue }
                let key = keys[Int(index) - 1]
                answers[key] = try Self.facts(
                    (head, horizon, collectionHead, collectionTag, askedTag, stored, visible), changed: nil, of: key.collection, store: location.description)
            }
            readers.checkin(connection)
            return answers
        } catch {
            await release(connection, to: readers, failed: true)
            throw failure(error)
        }
    }
}

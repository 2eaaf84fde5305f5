import DeltaClient
import DeltaCore
import DeltaSQLite
import Foundation
import Testing

@Suite("An outbox a killed process left half made")
struct OutboxRecoveryTests {
    @Test("an outbox left empty, or with a hot journal, by a process killed while creating it is completed on open, by the replica and by a reader")
    func emptyOutboxFile() async throws {
        try await withHarness { harness in
            try await harness.put(#"{"id":"a"}"#)
            let configuration = harness.configuration(snapshot: try await harness.bake("v1"))
            _ = try await Replica.open(configuration)
            let outbox = ReplicaFiles.outboxURL(forStore: configuration.storeURL)
            for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: outbox.path + suffix) }
            _ = FileManager.default.createFile(atPath: outbox.path, contents: nil)
            var read: [String] = []
            try ReplicaReader(storeURL: configuration.storeURL).forEachRecord(in: items) { read.append($0.id) }
            #expect(read == ["a"])
            // Killed a moment later, while the new outbox still journals the old way: a hot
            // rollback journal, which a read-only connection cannot roll back.
            for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: outbox.path + suffix) }
            let scratch = harness.directory.appendingPathComponent("scratch-outbox").path
            let writing = try Connection(path: scratch)
            try writing.execute(
                "PRAGMA cache_size = 1; BEGIN IMMEDIATE; CREATE TABLE t(x); WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 2000) INSERT INTO t SELECT randomblob(500) FROM n"
            )
            #expect(FileManager.default.fileExists(atPath: scratch + "-journal"))
            for suffix in ["", "-journal"] { try FileManager.default.copyItem(atPath: scratch + suffix, toPath: outbox.path + suffix) }
            try writing.execute("ROLLBACK")
            read = []
            try ReplicaReader(storeURL: configuration.storeURL).forEachRecord(in: items) { read.append($0.id) }
            #expect(read == ["a"])
            _ = FileManager.default.createFile(atPath: outbox.path, contents: nil)
            let replica = try await Replica.open(configuration)
            try await replica.put(try record(#"{"id":"b"}"#), in: items)
            await #expect(try replica.contents().keys.sorted() == ["a", "b"])
        }
    }
}

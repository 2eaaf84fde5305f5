import ArgumentParser
import DeltaClient
import DeltaCore
import DeltaSQLite
import Foundation

/// `deltasnap status`: where a replica stands, per collection.
struct Status: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show a replica's collections: local writes pending, conflicts, and the last sync.",
        discussion: """
            pending: records with a local write the server has not confirmed yet (queued, or \
            pushed and waiting for a pull to bring it back); conflicted: records whose write the \
            server turned down (deltasnap conflicts). The last sync is the last one that completed.
            """
    )

    @OptionGroup var local: LocalStore

    @Flag(help: "Print one JSON object instead of text.")
    var json = false

    func run() async throws {
        let outbox = try local.files()
        let counts = Dictionary(uniqueKeysWithValues: try outbox.counts().map { ($0.collection, ($0.pending, $0.conflicted)) })
        let connection = try Connection(path: local.store, mode: .readOnly)
        var collections: [(name: String, etag: String)] = []
        let query = try connection.statement("SELECT name, etag FROM collections ORDER BY name")
        while try query.step() { collections.append((query.string(0), query.string(1))) }
        query.reset()
        let lastSync = try connection.text("SELECT value FROM sync_state WHERE key = 'last_success'").flatMap(Double.init)
        let when = lastSync.map { ISO8601DateFormatter().string(from: Date(timeIntervalSince1970: $0)) }
        if json {
            let value = JSONValue.object([
                JSONMember(key: "client", value: .string(outbox.clientID)),
                JSONMember(
                    key: "collections",
                    value: .array(
                        collections.map { entry in
                            let (pending, conflicted) = counts[entry.name] ?? (0, 0)
                            return .object([
                                JSONMember(key: "conflicted", value: .number(String(conflicted))),
                                JSONMember(key: "etag", value: .string(entry.etag)),
                                JSONMember(key: "name", value: .string(entry.name)),
                                JSONMember(key: "pending", value: .number(String(pending))),
                            ])
                        })),
                JSONMember(key: "lastSync", value: when.map { .string($0) } ?? .null),
            ])
            print(String(decoding: value.canonicalBytes, as: UTF8.self))
            return
        }
        print("client \(outbox.clientID), last sync \(when ?? "never")")
        for entry in collections {
            let (pending, conflicted) = counts[entry.name] ?? (0, 0)
            print("\(entry.name): \(pending) pending, \(conflicted) conflicted (ETag \(entry.etag))")
        }
    }
}

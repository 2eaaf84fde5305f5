import ArgumentParser
import DeltaCore
import DeltaStore
import Foundation

/// `deltasnap log`: who changed what, through pushes.
struct Log: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List the mutations pushes applied to a collection: position, time, user, client, mutation id, op.",
        discussion: """
            Every mutation a push applies is logged with the user whose token pushed it (empty for \
            an app's client key or the owner's secret):
              deltasnap log --db app.sqlite --collection notes --id n1
            With --json, one object per line: {"client":…,"id":…,"mutation":N,"op":…,"position":N,"time":N,"user":…|null}
            """)

    @Option(help: ArgumentHelp(Database.help, valueName: "database"))
    var db = "deltasnap.sqlite"

    @Option(help: ArgumentHelp("The collection.", valueName: "name"))
    var collection: String

    @Option(help: ArgumentHelp("Only this record.", valueName: "id"))
    var id: String?

    @Option(help: ArgumentHelp("At most this many lines.", valueName: "count"))
    var limit = 10_000

    @Flag(help: "Print one JSON object per mutation instead of text.")
    var json = false

    func run() async throws {
        let name = try CollectionName(collection)
        let store = try await Database(db).open()
        defer { Task { try? await store.close() } }
        for entry in try await store.mutationLog(name, id: id, after: 0, limit: max(0, limit)) {
            if json {
                let object = JSONValue.object([
                    JSONMember(key: "client", value: .string(entry.client)), JSONMember(key: "id", value: .string(entry.id)),
                    JSONMember(key: "mutation", value: .number(String(entry.mutation))), JSONMember(key: "op", value: .string(entry.operation)),
                    JSONMember(key: "position", value: .number(String(entry.position))), JSONMember(key: "time", value: .number(String(entry.time))),
                    JSONMember(key: "user", value: entry.user.map { .string($0) } ?? .null),
                ])
                print(String(decoding: object.canonicalBytes, as: UTF8.self))
            } else {
                let time = ISO8601DateFormatter().string(from: Date(timeIntervalSince1970: TimeInterval(entry.time)))
                print("\(entry.position)\t\(time)\t\(entry.user ?? "-")\t\(entry.client)\t\(entry.mutation)\t\(entry.operation)\t\(entry.id)")
            }
        }
    }
}

import ArgumentParser
import DeltaClient
import DeltaCore
import Foundation

/// `deltasnap conflicts`: the writes the server turned down, with both versions.
struct Conflicts: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List a replica's conflicts: local writes the server did not apply, with its copy.",
        discussion: """
            A conflict is a local write made on top of a version the server has since changed \
            (reason changed), deleted (hidden), a create over an id the server has (exists), or a \
            write whose base the server does not know (unknown-base). Settle each one with \
            deltasnap resolve. A write the server refused has reason denied: <rule> (collection: \
            the server takes no writes to it from this app or user; write, create, update or \
            delete: a rule refused it; read: a record you may not read holds the id): discard it \
            (resolve --keep server) or edit it. With --json, one JSON object per line:
              {"collection":…,"id":…,"local":{…},"mutation":N,"reason":…,"server":{…}|null}
            """
    )

    @OptionGroup var local: LocalStore

    @Flag(help: "Print one JSON object per conflict instead of text.")
    var json = false

    func run() async throws {
        let conflicts = try local.files().conflicts()
        if conflicts.isEmpty && !json { print("no conflicts") }
        for conflict in conflicts {
            if json {
                print(String(decoding: Self.json(conflict).canonicalBytes, as: UTF8.self))
            } else {
                let server = conflict.server.map { String(decoding: $0.wireJSON, as: UTF8.self) } ?? "(none)"
                print(
                    "\(conflict.collection)/\(conflict.id): \(conflict.reason)\n  local:  \(conflict.local.map { String(decoding: $0.wireJSON, as: UTF8.self) } ?? "(none)")\n  server: \(server)"
                )
            }
        }
    }

    /// A conflict as JSON, for `conflicts --json` and `sync --json`.
    static func json(_ conflict: Conflict<Record>) -> JSONValue {
        .object([
            JSONMember(key: "collection", value: .string(conflict.collection)),
            JSONMember(key: "id", value: .string(conflict.id)),
            JSONMember(key: "local", value: conflict.local.flatMap { try? JSONValue(parsing: $0.wireJSON) } ?? .null),
            JSONMember(key: "mutation", value: .number(String(conflict.mutation))),
            JSONMember(key: "reason", value: .string(conflict.reason)),
            JSONMember(key: "server", value: conflict.server.flatMap { try? JSONValue(parsing: $0.wireJSON) } ?? .null),
        ])
    }
}

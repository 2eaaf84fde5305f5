import ArgumentParser
import DeltaCore
import DeltaStore
import Foundation

/// `deltasnap compact`: drop hidden records and superseded versions before a horizon.
struct Compact: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Drop hidden records and old history before a horizon, in one transaction; older tokens then get 409 expired.",
        discussion: """
            Every hide keeps a tombstone and every update keeps the version it replaced (for \
            exact selection deltas), so a database that changes grows until it is compacted. \
            Compaction drops the tombstones and superseded versions at or before the horizon. \
            Clients whose token is at or after it keep getting exact deltas; clients with an older \
            token get 409 expired and reset to their bundled snapshot. Blobs stored at or before \
            the horizon that no record references any more (not even a tombstone left) go too.

            A snapshot still shipped in apps carries a token: apps that reset go back to it. \
            deltasnap bake --db records the tokens it bakes at, and compact never moves the \
            horizon past one of them unless --drop-baked is given (it says which apps would then \
            download the full dataset on a reset). Re-bake the app's snapshot at least as often \
            as you compact, so that a reset stays "bundled snapshot + one small delta".

            Safe while the server runs and writes: compaction is one transaction ordered with the \
            writes; reads in progress finish on the data they started with.

            Examples:
              deltasnap compact --db data.sqlite --older-than 30d --dry-run
              deltasnap compact --db data.sqlite --before 'W/"1.de17a5a9b0000001.1.782aa956"'
            """
    )

    @Option(help: ArgumentHelp(Database.help, valueName: "database"))
    var db = "deltasnap.sqlite"

    @Option(help: ArgumentHelp("The horizon as a token (an ETag this database issued): history before its position is dropped.", valueName: "etag"))
    var before: String?

    @Option(help: ArgumentHelp("The horizon as an age: the newest commit older than this (30d, 12h, 90m, 3600s).", valueName: "duration"))
    var olderThan: String?

    @Option(
        help: ArgumentHelp("Where a SQLite database keeps blobs, when serve was given --blobs (default: the --db path with -blobs appended).", valueName: "dir")
    )
    var blobs: String?

    @Flag(help: "Move the horizon past the tokens of recorded bakes too (their apps download the full dataset on a reset).")
    var dropBaked = false

    @Flag(help: "Say what would be dropped, and change nothing.")
    var dryRun = false

    @Flag(help: "Print the report as one JSON object.")
    var json = false

    func run() async throws {
        guard (before == nil) != (olderThan == nil) else { throw CommandFailure("compact: give exactly one of --before ETAG or --older-than DURATION") }
        let store = try await Database(db).open(blobDirectory: blobs)
        defer { Task { try? await store.close() } }
        let position: UInt64
        if let before {
            let token: Token
            do { token = try Token(entityTag: before) } catch { throw CommandFailure("--before: \(error)") }
            guard token.database == store.databaseID else {
                throw CommandFailure(
                    "--before: the token was issued by another database (\(String(token.database, radix: 16)), this is \(String(store.databaseID, radix: 16)))")
            }
            position = token.position
        } else {
            guard let text = olderThan, let seconds = Compaction.duration(text) else {
                throw CommandFailure(
                    "--older-than: expected a number and a unit s, m, h or d, as 30d, at most 1000 years (got \(String(reflecting: olderThan ?? "")))")
            }
            position = try await store.position(committedBefore: Date().addingTimeInterval(-seconds))
        }
        let report = try await store.compact(before: position, dropBaked: dropBaked, dryRun: dryRun)
        print(json ? Self.json(report) : Self.text(report, asked: position))
    }

    static func text(_ report: CompactionReport, asked: UInt64) -> String {
        var lines = [
            "\(report.dryRun ? "would compact" : "compacted"): horizon \(report.horizon) (was \(report.previousHorizon)); "
                + "\(report.dryRun ? "would drop" : "dropped") \(report.droppedHidden) hidden records and \(report.droppedVersions) superseded versions"
        ]
        if report.droppedBlobs > 0 {
            lines[0] += ", and \(report.droppedBlobs) blobs no record references (\(report.droppedBlobBytes) bytes)"
        }
        if report.horizon < asked, !report.keptFor.isEmpty {
            lines.append("kept the horizon before \(asked) for snapshots still shipped (--drop-baked to compact past them):")
        }
        for bake in report.keptFor {
            lines.append("  kept: \(bake.collection) baked \(HTTPDate.format(UInt64(bake.bakedAt.timeIntervalSince1970))) at \(bake.entityTag)")
        }
        for bake in report.expiredBakes {
            lines.append("  expired: \(bake.collection) baked at \(bake.entityTag): apps shipping it download the full dataset on a reset; re-bake")
        }
        return lines.joined(separator: "\n")
    }

    static func json(_ report: CompactionReport) -> String {
        func bakes(_ list: [BakedSnapshot]) -> JSONValue {
            .array(
                list.map {
                    .object([
                        JSONMember(key: "bakedAt", value: .number(String(Int($0.bakedAt.timeIntervalSince1970)))),
                        JSONMember(key: "collection", value: .string($0.collection.rawValue)),
                        JSONMember(key: "etag", value: .string($0.entityTag)),
                    ])
                })
        }
        return String(
            decoding: JSONValue.object([
                JSONMember(key: "droppedBlobBytes", value: .number(String(report.droppedBlobBytes))),
                JSONMember(key: "droppedBlobs", value: .number(String(report.droppedBlobs))),
                JSONMember(key: "droppedHidden", value: .number(String(report.droppedHidden))),
                JSONMember(key: "droppedVersions", value: .number(String(report.droppedVersions))),
                JSONMember(key: "dryRun", value: .bool(report.dryRun)),
                JSONMember(key: "expiredBakes", value: bakes(report.expiredBakes)),
                JSONMember(key: "horizon", value: .number(String(report.horizon))),
                JSONMember(key: "keptFor", value: bakes(report.keptFor)),
                JSONMember(key: "previousHorizon", value: .number(String(report.previousHorizon))),
            ]).canonicalBytes, as: UTF8.self)
    }
}

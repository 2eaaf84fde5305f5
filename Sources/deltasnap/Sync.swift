import ArgumentParser
import DeltaClient
import DeltaCore
import Foundation

/// `deltasnap sync`: the client's applier, for scripts and tests.
struct Sync: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Bring a local replica up to date: install the snapshot, then apply the server's delta.",
        discussion: """
            The first run creates the store from the snapshot (verified as it streams); every run \
            then sends the stored token and applies what changed, in one transaction with the new \
            token. When a delta cannot be applied (the server's reset signal, a corrupt or truncated \
            body, a delta computed from another token), the collection is reset to the snapshot and \
            synced again from there.

            Local writes (deltasnap put, delete, resolve) are pushed first, with the client key \
            (--client-key or DELTASNAP_CLIENT_KEY), then the pull runs. A push the server refuses \
            for good (a wrong key, a collection apps may not write) keeps the writes and is \
            reported; conflicts are listed (deltasnap conflicts) and never overwrite either side.

            Exit status: 0 synced; 75 a temporary failure (no network, a timeout, 5xx or 429, or \
            still backing off after one): the store kept its data, try again later, or now with \
            --force; 1 anything else.

            A selection holds only part of a collection: the records that match a filter, and of \
            those the first N in id order. Deltas keep it exact (a record edited out of the filter \
            arrives as a deletion); changing a selection resets that collection alone.

            Examples:
              deltasnap sync --store replica.sqlite \\
                --snapshot Snapshots/demo.snapshot --url http://127.0.0.1:8080/api
              deltasnap sync --store red.sqlite --snapshot Snapshots/demo.snapshot \\
                --url http://127.0.0.1:8080/api --filter 'widgets={"color":{"eq":"red"}}' --limit widgets=100
            """
    )

    @Option(help: ArgumentHelp("The local replica (a SQLite file, created when missing).", valueName: "path"))
    var store: String

    @Option(help: ArgumentHelp("The bundled snapshot the replica starts from and resets to.", valueName: "file"))
    var snapshot: String

    @Option(
        help: ArgumentHelp(
            "The server's API root (the collection name is appended), or one collection's URL, which may carry its selection: http://host:port/api/widgets?filter=…&limit=….",
            valueName: "http://host:port/api"))
    var url: String

    @OptionGroup var selection: SelectionOptions

    @Option(
        help: ArgumentHelp(
            "How the store is checked when opened: quick (PRAGMA quick_check), full (integrity_check) or none; a store that fails is rebuilt from the snapshot.",
            valueName: "check"))
    var integrityCheck: IntegrityCheckOption = .quick

    @OptionGroup var credentials: ClientCredentialOptions

    @Option(
        help: ArgumentHelp(
            "Download the blobs this collection's records reference with the sync, so that they are there offline (repeat for several; default: each on first access).",
            valueName: "collection"))
    var eagerBlobs: [String] = []

    @Flag(help: "Only push the queued local writes; do not pull.")
    var pushOnly = false

    @Flag(help: "Sync now even while backing off after a failed sync (the server is back, the network returned).")
    var force = false

    @Flag(help: "Print one JSON object instead of text.")
    var json = false

    func run() async throws {
        let address = try ServerAddress(url)
        var configuration = ReplicaConfiguration(
            storeURL: URL(fileURLWithPath: store), snapshotURL: URL(fileURLWithPath: snapshot), serverURL: address.root)
        configuration.selections = try selection.selections(adding: address.collection.map { ($0.name, $0.selection) })
        // Indexes and search stay as the store has them unless asked for.
        if !selection.index.isEmpty { configuration.indexes = try selection.indexes() }
        if !selection.compoundIndex.isEmpty { configuration.compoundIndexes = try selection.compoundIndexes() }
        if !selection.search.isEmpty { configuration.searchable = try selection.searchable() }
        configuration.integrityCheck = integrityCheck.value
        for name in eagerBlobs { configuration.blobDownloads[name] = .eager }
        credentials.apply(to: &configuration)
        let replica: Replica
        let report: SyncReport
        do {
            replica = try await Replica.open(configuration)
            for name in configuration.selections.keys where !replica.collections.contains(name) {
                throw CommandFailure("\(name): the snapshot has no such collection (it holds \(replica.collections.joined(separator: ", ")))")
            }
            report = try await replica.sync(pull: !pushOnly, force: force)
        } catch let error as ReplicaError {
            if json {
                print(SyncOutput.json(error: error))
            } else {
                // A retry time means something only for a failure worth retrying.
                let retry = error.isTransient ? error.retryAt.map { "; retry in \(max(0, Int($0.timeIntervalSinceNow.rounded(.up)))) s" } ?? "" : ""
                let text = error.description.replacingOccurrences(of: "(sync(force: true) tries now)", with: "(--force tries now)")
                FileHandle.standardError.write(Data("deltasnap sync: \(text)\(retry)\n".utf8))
            }
            throw ExitCode(error.isTransient ? 75 : 1)
        }
        print(json ? SyncOutput.json(replica.openReport, report) : SyncOutput.text(replica.openReport, report))
    }
}

/// `--integrity-check`: how the store is checked when opened.
enum IntegrityCheckOption: String, ExpressibleByArgument, CaseIterable {
    case quick, full, none

    /// The library's setting.
    var value: ReplicaConfiguration.IntegrityCheck {
        switch self {
        case .quick: return .quick
        case .full: return .full
        case .none: return .none
        }
    }
}

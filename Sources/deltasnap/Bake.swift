import ArgumentParser
import DeltaAuthoring
import DeltaCore
import DeltaRules
import DeltaStore
import Foundation

/// `deltasnap bake`: write a snapshot file for an app bundle, from a running server or its database.
struct Bake: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Write a compressed, verifiable, byte-reproducible snapshot of full datasets.",
        discussion: """
            From a running server (build machines without database access):
              deltasnap bake --url http://HOST:PORT/api/COLLECTION --out FILE

            From the server's database (a SQLite file or a postgres:// URL), several collections \
            in one consistent read:
              deltasnap bake --db deltasnap.sqlite --collection widgets \\
                --collection gadgets --out FILE

            Under rules (deltasnap serve --rules), a collection that is not public holds users' \
            rows: it is refused unless --as-claims names the one user to bake it for (a user \
            who owns no rows, or a collection nobody has written yet, bakes empty, for an app's \
            bundle). Name the collections in any order: the snapshot holds them sorted by name.

            A selection's snapshot, for an app that holds only part of a collection (its token is \
            the selection's, so the app's first sync is a small delta of that selection):
              deltasnap bake --db deltasnap.sqlite --collection widgets \\
                --filter '{"color":{"eq":"red"}}' --limit 1000 --out FILE

            The snapshot carries each collection's exact server token, so an app's first sync \
            after install downloads only what changed since. The file is written next to FILE and \
            renamed into place when complete. Format: docs/SNAPSHOT-FORMAT.md.
            Baking records the token it baked at (with --url: given the write secret, through \
            POST /bakes), so that deltasnap compact keeps it valid while apps ship the snapshot.
            """
    )

    @Option(help: ArgumentHelp("The full-dataset URL of one collection, http://HOST:PORT/api/NAME.", valueName: "url"))
    var url: String?

    @Option(help: ArgumentHelp("The server's database (instead of --url): a SQLite file or a postgres:// URL.", valueName: "database"))
    var db: String?

    @Option(help: ArgumentHelp("A collection to bake from --db; repeat for several.", valueName: "name"))
    var collection: [String] = []

    @Option(help: ArgumentHelp("The snapshot file to write.", valueName: "file"))
    var out: String

    @Option(
        help: ArgumentHelp("Bake only the records that match this filter (docs/PROTOCOL.md, Selections), for an app that holds a selection.", valueName: "json")
    )
    var filter: String?

    @Option(
        help: ArgumentHelp(
            "With --url: the server's write secret (default: $DELTASNAP_WRITE_TOKEN), to record the baked token there (POST /bakes), so that deltasnap compact keeps it valid.",
            valueName: "secret"))
    var writeToken: String?
    @Option(help: ArgumentHelp("Bake at most N records: the first N that match, in id order.", valueName: "n"))
    var limit: Int?

    @Option(
        help: ArgumentHelp(
            "With --db and rules (deltasnap serve --rules): bake the rule-restricted collections for the user these claims name, e.g. '{\"sub\":\"ada\"}' (the tokens are theirs: their app's first sync is a small delta). Public collections are baked whole.",
            valueName: "json"))
    var asClaims: String?

    @Flag(
        help: ArgumentHelp(
            "Put the blobs the baked records reference into the snapshot (format 2.0), so that an app has its files at first launch, offline. With --url, blobs a public collection's rows reference download without a secret; others need --write-token."
        ))
    var blobs = false

    func validate() throws {
        switch (url, db) {
        case (nil, nil): throw ValidationError("give --url (a running server) or --db (its database)")
        case (.some, .some): throw ValidationError("give --url or --db, not both")
        case (.some, nil): if !collection.isEmpty { throw ValidationError("--collection goes with --db; --url names its collection") }
        case (nil, .some): if collection.isEmpty { throw ValidationError("--db needs at least one --collection") }
        }
        if asClaims != nil && db == nil { throw ValidationError("--as-claims bakes from --db") }
        if (filter != nil || limit != nil) && collection.count > 1 {
            throw ValidationError("--filter and --limit select from one collection; bake one --collection at a time")
        }
        for name in collection {
            do { _ = try CollectionName(name) } catch { throw ValidationError("--collection: \(error)") }
        }
    }

    func run() async throws {
        let output = try AtomicOutput(path: out)
        do {
            let manifest: SnapshotManifest
            let selection = try requestedSelection()
            if let db {
                manifest = try await bakeFromDatabase(db, selection, output)
            } else {
                manifest = try await bakeFromServer(try selectionURL(url!, selection), output)
            }
            try output.commit()
            if let url { try await recordOnServer(url, manifest) }
            let size = (try? FileManager.default.attributesOfItem(atPath: out)[.size] as? Int) ?? 0
            print(
                "baked \(manifest.totalRecords) records\(blobs ? " and their blobs" : "") of \(manifest.collections.map(\.name.rawValue).joined(separator: ", ")) into \(out) (\(size) bytes)"
            )
        } catch {
            output.abandon()
            throw error
        }
    }

    private func bakeFromDatabase(_ text: String, _ selection: Selection, _ output: AtomicOutput) async throws -> SnapshotManifest {
        let database = try Database(text)
        if case .sqlite(let path) = database, !FileManager.default.fileExists(atPath: path) { throw CommandFailure("\(path): no such database") }
        let store = try await database.open()
        defer { Task { try? await store.close() } }
        let names = try collection.map(CollectionName.init)
        // A selection, or rules (public collections whole, restricted ones for --as-claims's user): one read per collection.
        let rules = try await store.currentRules()
        if !selection.isEverything || asClaims != nil || rules.map({ stored in !names.allSatisfy(stored.rules.isPublic) }) == true {
            return try await bakeSelections(store, names, selection, output)
        }
        let read = try await store.openFullRead(try collection.map(CollectionName.init))
        defer { read.close() }
        let manifest = try SnapshotManifest(
            collections: read.collections.map {
                .init(name: $0.name, entityTag: $0.token.entityTag, lastModified: $0.token.lastModified, records: $0.records, digest: $0.digest)
            }, blobs: blobs)
        let progress = Progress(label: "bake", total: manifest.totalRecords)
        let writer = try SnapshotWriter(manifest: manifest) { try output.write($0) }
        var written = 0
        for entry in manifest.collections {
            while let batch = try await read.next(entry.name, maximumBytes: 1 << 16) {
                try batch.forEach { body, _ in try writer.append(body: body) }
                written += batch.count
                progress.update(done: written, records: written)
            }
        }
        progress.finish()
        try await writeBlobs(writer, from: .store(store))
        try writer.finish()
        // So that `deltasnap compact` keeps these tokens valid while the snapshot ships.
        try await store.recordBakes(read.collections.map { ($0.name, $0.token) })
        return manifest
    }
}

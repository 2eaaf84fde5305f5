import DeltaAuthoring
import DeltaCore
import DeltaRules
import DeltaStore
import Foundation

extension Bake {
    /// The selection `--filter` and `--limit` ask for (`.everything` without them).
    func requestedSelection() throws -> Selection {
        do {
            return try Selection(filter: filter, limit: limit.map(String.init))
        } catch let error as WireError {
            throw CommandFailure("--filter/--limit: \(error)")
        }
    }

    /// `--url` with the selection added to its query, for baking from a running server.
    func selectionURL(_ text: String, _ selection: Selection) throws -> String {
        guard !selection.isEverything else { return text }
        guard var components = URLComponents(string: text), components.query == nil else {
            throw CommandFailure("--url: give the selection either in the URL's query or with --filter/--limit, not both")
        }
        components.percentEncodedQuery = selection.query
        return components.string ?? text
    }

    /// Bakes `names` from the database one read each, as selections: `selection` of each public
    /// collection, and of each rule-restricted one within the read rule of `--as-claims`'s user,
    /// resolved in that read, with a token bound to them and to the rules' version, as the
    /// server's answer to that user would be. Each collection's records stream from its read
    /// transaction into a spool file (memory stays bounded), then into the snapshot; each token
    /// is exact for its collection, so the app's first sync is a small delta, or a `304`.
    ///
    /// The spool files go into the snapshot in the manifest's order (collections sorted by name),
    /// whatever order `--collection` named them in: the writer only counts records, so records
    /// written in another order would land under the wrong collection. Each collection's records
    /// are checked against its digest as they are written, so a snapshot its readers would refuse
    /// is never left behind.
    func bakeSelections(_ store: any ChangeReader & BlobStore & StoreAdministration, _ names: [CollectionName], _ selection: Selection, _ output: AtomicOutput)
        async throws -> SnapshotManifest
    {
        var spooled: [CollectionName: Spooled] = [:]
        defer { for item in spooled.values { try? FileManager.default.removeItem(at: item.file) } }
        for name in names {
            guard spooled[name] == nil else { throw CommandFailure("--collection \(name): named twice") }
            spooled[name] = try await spool(store, name, selection, for: try await userBake(store, name))
        }
        let manifest = try SnapshotManifest(collections: spooled.values.map(\.entry), blobs: blobs)
        let writer = try SnapshotWriter(manifest: manifest) { try output.write($0) }
        let progress = Progress(label: "bake", total: manifest.totalRecords)
        var written = 0
        for entry in manifest.collections {
            guard let item = spooled[entry.name] else { throw CommandFailure("\(entry.name): no records were read for the collection") }
            let reader = try FileHandle(forReadingFrom: item.file)
            defer { try? reader.close() }
            var pending: [UInt8] = []
            var digest = StateDigest.empty
            while let chunk = try reader.read(upToCount: 1 << 20), !chunk.isEmpty {
                pending.append(contentsOf: chunk)
                var start = 0
                while let end = pending[start...].firstIndex(of: UInt8(ascii: "\n")) {
                    let body = Array(pending[start..<end])
                    digest.add(body: body)
                    try writer.append(body: body)
                    written += 1
                    start = end + 1
                }
                pending.removeFirst(start)
                progress.update(done: written, records: written)
            }
            if let expected = entry.digest, expected != digest {
                throw CommandFailure(
                    "collection \(entry.name): the records read do not match the state digest of their token (\(expected.hex.prefix(16))…, records \(digest.hex.prefix(16))…)"
                )
            }
        }
        progress.finish()
        try await writeBlobs(writer, from: .store(store))
        try writer.finish()
        try await store.recordBakes(spooled.values.map { ($0.entry.name, $0.token) })
        return manifest
    }

    /// One collection's records, spooled from one read, with its manifest entry and token.
    struct Spooled {
        let entry: SnapshotManifest.Entry
        let token: Token
        let file: URL
    }

    private func spool(_ store: any ChangeReader, _ name: CollectionName, _ selection: Selection, for user: UserBake?) async throws -> Spooled {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("deltasnap-bake-\(UUID().uuidString)")
        guard FileManager.default.createFile(atPath: file.path, contents: nil), let handle = try? FileHandle(forWritingTo: file) else {
            throw CommandFailure("\(file.path): cannot write the spool file")
        }
        defer { try? handle.close() }
        var count = 0
        func append(_ batch: RecordBatch) throws {
            var lines: [UInt8] = []
            batch.forEach { body, _ in
                lines.append(contentsOf: body)
                lines.append(UInt8(ascii: "\n"))
            }
            try handle.write(contentsOf: lines)
            count += batch.count
        }
        if user == nil && selection.isEverything {
            // The whole collection: its own token, as a full read answers it.
            let read = try await store.openFullRead([name])
            defer { read.close() }
            guard let facts = read.collections.first else { throw CommandFailure("\(name): the database gave no full read of the collection") }
            while let batch = try await read.next(name, maximumBytes: 1 << 16) { try append(batch) }
            let entry = SnapshotManifest.Entry(
                name: name, entityTag: facts.token.entityTag, lastModified: facts.token.lastModified, records: count, digest: facts.digest)
            return Spooled(entry: entry, token: facts.token, file: file)
        }
        let opened: ReadResult
        if let user {
            let (start, _) = try await store.openRuleRead(name, since: .nothing, client: nil)
            guard case .source(let source, let mode) = start else { throw CommandFailure("\(name): the database gave no full read of the collection") }
            let rule = try await source.resolve(user.rule, for: user.claims)
            let within = try Selection(filter: selection.filter.map { .and([rule, $0]) } ?? rule, limit: selection.limit)
            opened = try await SelectionFeed.open(source, mode, selection: within, mark: nil, user: user.mark, fingerprint: selection.fingerprint)
        } else {
            let (start, _) = try await store.openSelectionRead(name, since: .nothing, client: nil)
            guard case .source(let source, let mode) = start else { throw CommandFailure("\(name): the database gave no full read of the collection") }
            opened = try await SelectionFeed.open(source, mode, selection: selection, mark: nil)
        }
        guard case .changes(let feed) = opened else { throw CommandFailure("\(name): the database gave no full read of the collection") }
        defer { feed.close() }
        while let batch = try await feed.next(maximumBytes: 1 << 16) { try append(batch) }
        let entry = SnapshotManifest.Entry(
            name: name, entityTag: feed.token.entityTag, lastModified: feed.token.lastModified, records: count, digest: feed.digest)
        return Spooled(entry: entry, token: feed.token, file: file)
    }

    /// Whom `name` is baked for: nil for a public collection (or without rules); `--as-claims`'s
    /// user for a rule-restricted one, which is refused without it.
    func userBake(_ store: any ChangeReader, _ name: CollectionName) async throws -> UserBake? {
        guard let stored = try await store.currentRules() else {
            if asClaims != nil { throw CommandFailure("--as-claims: the database holds no rules (deltasnap serve --rules installs them)") }
            return nil
        }
        guard !stored.rules.isPublic(name) else { return nil }
        guard let asClaims else {
            throw CommandFailure(
                "collection \(name): the rules (version \(stored.version)) restrict it to its users: bake it for one user with --as-claims '{\"sub\":\"…\"}', or leave it out"
            )
        }
        guard case .when(let rule)? = stored.rules.rule(for: name)?.read else {
            throw CommandFailure("collection \(name): the rules give users no reads of it")
        }
        let claims: Claims
        do { claims = try Claims(parsing: asClaims) } catch { throw CommandFailure("--as-claims: \(error)") }
        return UserBake(rule: rule, claims: claims, mark: UserMark(binding: claims.binding(reading: rule.claims), rulesVersion: stored.version))
    }
}

/// Whom a rule-restricted collection is baked for.
struct UserBake {
    /// The collection's read rule.
    let rule: RuleFilter
    /// The user's claims.
    let claims: Claims
    /// What the snapshot's token is bound to.
    let mark: UserMark
}

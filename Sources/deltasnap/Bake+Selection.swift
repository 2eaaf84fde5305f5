import DeltaCore
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

    /// Bakes one collection's selection from the database: the records stream from one read
    /// transaction into a spool file (counted on the way, memory stays bounded), then into the
    /// snapshot, whose token is the selection's, so the app's first sync is a small delta.
    ///
    /// For a `user` (a rule-restricted collection, `--as-claims`), the selection is taken within
    /// their read rule, resolved in the same read transaction, and the token is bound to them
    /// and to the rules' version, as the server's answer to that user would be.
    func bakeSelection(
        _ store: any ChangeStore, _ name: CollectionName, _ selection: Selection, _ output: AtomicOutput, for user: UserBake? = nil
    ) async throws -> SnapshotManifest {
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
        let spool = FileManager.default.temporaryDirectory.appendingPathComponent("deltasnap-bake-\(UUID().uuidString)")
        guard FileManager.default.createFile(atPath: spool.path, contents: nil), let handle = try? FileHandle(forWritingTo: spool) else {
            throw CommandFailure("\(spool.path): cannot write the spool file")
        }
        defer { try? FileManager.default.removeItem(at: spool) }
        var count = 0
        while let batch = try await feed.next(maximumBytes: 1 << 16) {
            var lines: [UInt8] = []
            batch.forEach { body, _ in
                lines.append(contentsOf: body)
                lines.append(UInt8(ascii: "\n"))
            }
            try handle.write(contentsOf: lines)
            count += batch.count
        }
        try handle.close()
        let manifest = try SnapshotManifest(collections: [
            .init(name: name, entityTag: feed.token.entityTag, lastModified: feed.token.lastModified, records: count, digest: feed.digest)
        ])
        let writer = try SnapshotWriter(manifest: manifest) { try output.write($0) }
        let progress = Progress(label: "bake", total: count)
        var written = 0
        let reader = try FileHandle(forReadingFrom: spool)
        defer { try? reader.close() }
        var pending: [UInt8] = []
        while let chunk = try reader.read(upToCount: 1 << 20), !chunk.isEmpty {
            pending.append(contentsOf: chunk)
            var start = 0
            while let end = pending[start...].firstIndex(of: UInt8(ascii: "\n")) {
                try writer.append(body: Array(pending[start..<end]))
                written += 1
                start = end + 1
            }
            pending.removeFirst(start)
            progress.update(done: written, records: written)
        }
        try writer.finish()
        progress.finish()
        try await store.recordBakes([(name, feed.token)])
        return manifest
    }

    /// The user a rule-restricted collection is baked for (`--as-claims`), nil for a public one
    /// or without rules; refuses a restricted collection without `--as-claims`.
    func userBake(_ store: any ChangeStore) async throws -> UserBake? {
        guard let stored = try await store.currentRules() else {
            if asClaims != nil { throw CommandFailure("--as-claims: the database holds no rules (deltasnap serve --rules installs them)") }
            return nil
        }
        for name in collection where !stored.rules.isPublic(try CollectionName(name)) {
            guard let asClaims, collection.count == 1 else {
                throw CommandFailure(
                    "collection \(name): the rules (version \(stored.version)) restrict it to its users: bake it for one user with --as-claims '{\"sub\":\"…\"}', or leave it out"
                )
            }
            guard case .when(let rule)? = stored.rules.rule(for: try CollectionName(name))?.read else {
                throw CommandFailure("collection \(name): the rules give users no reads of it")
            }
            let claims: Claims
            do { claims = try Claims(parsing: asClaims) } catch { throw CommandFailure("--as-claims: \(error)") }
            let mark = UserMark(binding: claims.binding(reading: rule.claims), rulesVersion: stored.version)
            return UserBake(rule: rule, claims: claims, mark: mark)
        }
        return nil
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

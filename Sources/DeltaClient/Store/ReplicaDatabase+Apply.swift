import DeltaCore
import DeltaSQLite
import Foundation

/// A downloaded `200` answer, waiting in a temporary file to be applied.
struct Answer {
    /// Whether the body is a delta (`Delta-Mode: delta`) or replaces the collection (`full`).
    enum Mode { case delta, full }

    /// The body, as URLSession stored it (gzip-decoded or not).
    let file: URL
    /// How to apply it.
    let mode: Mode
    /// The validators that come with it.
    let entityTag: String
    /// The `Last-Modified` that comes with it.
    let lastModified: String
    /// The state digest at `entityTag` (`Delta-Digest`): what the collection must sum to once applied.
    let digest: StateDigest
}

extension ReplicaDatabase {
    /// Installs `collections` from the snapshot in one transaction that commits only once the
    /// whole file has been read and verified.
    func install(_ collections: Set<String>, from snapshot: URL, cancelled: () -> Bool) throws {
        guard !collections.isEmpty else { return }
        try connection.transaction(.immediate) {
            for name in collections { try clear(name) }
            try restore(collections, from: snapshot, cancelled: cancelled)
            for name in collections { try markEagerBlobs(name) }
        }
    }

    /// One transaction for one collection: optionally restore it from the snapshot, then
    /// optionally apply an answer, then store the validators that describe the result.
    /// Returns what the answer did and which ids changed (`.all` after a restore or a full dataset).
    func commit(_ collection: String, restoreFrom snapshot: URL?, answer: Answer?, cancelled: () -> Bool) throws -> (CollectionOutcome, ChangedIDs) {
        try connection.transaction(.immediate) {
            if let snapshot {
                try clear(collection)
                try restore([collection], from: snapshot, cancelled: cancelled)
            }
            if snapshot != nil { try markEagerBlobs(collection) }
            guard let answer else { return (.notModified, snapshot == nil ? .ids([]) : .all) }
            guard let snapshotTag = try state(of: collection)?.snapshotTag else {
                throw ReplicaError(.store, "the collection was never installed", evidence: collection)
            }
            var changed: ChangedIDs = snapshot == nil && answer.mode == .delta ? .ids([]) : .all
            let outcome = try apply(answer, to: collection, changed: &changed, cancelled: cancelled)
            try setState(CollectionState(entityTag: answer.entityTag, lastModified: answer.lastModified, snapshotTag: snapshotTag), of: collection)
            if changed != .ids([]) { try markEagerBlobs(collection) }
            return (outcome, changed)
        }
    }

    /// Stores the validators a `304` repeated, when it sent both and they differ from the stored ones
    /// (the protocol allows an older token than the one sent); returns the entity tag now stored.
    func repeatValidators(_ entityTag: String?, _ lastModified: String?, of collection: String) throws -> String? {
        guard var state = try state(of: collection) else { return nil }
        guard let entityTag, let lastModified, entityTag != state.entityTag || lastModified != state.lastModified else { return state.entityTag }
        state.entityTag = entityTag
        state.lastModified = lastModified
        try connection.transaction(.immediate) { try setState(state, of: collection) }
        return entityTag
    }

    /// Streams the snapshot, inserting the records of `collections` and setting their validators.
    private func restore(_ collections: Set<String>, from snapshot: URL, cancelled: () -> Bool) throws {
        let reader = try SnapshotFile.reader(snapshot)
        var bundled = blobs.map(BundledBlobs.init(into:))
        defer { bundled?.abandon() }
        var inserted = 0
        var cuts: [String: SelectionCut] = [:]
        var cutDigests: [String: StateDigest] = [:]
        do {
            while let item = try reader.next() {
                switch item {
                case .manifest(let manifest):
                    for entry in manifest.collections where collections.contains(entry.name.rawValue) {
                        let name = entry.name.rawValue
                        let selection = selections[name] ?? .everything
                        var state = CollectionState(entityTag: entry.entityTag, lastModified: entry.lastModified, snapshotTag: entry.entityTag)
                        if !Self.snapshotFits(entry.entityTag, selection) {
                            // No token: the first sync asks for the selection in full.
                            state.entityTag = ""
                            state.lastModified = ""
                            cuts[name] = SelectionCut(selection)
                        }
                        try setState(state, of: name)
                        try setInstalledSelection(selection, of: name)
                    }
                    let missing = collections.subtracting(manifest.collections.map(\.name.rawValue))
                    if let name = missing.sorted().first {
                        throw ReplicaError(.snapshot, "the bundled snapshot does not hold the collection", evidence: name)
                    }
                case .record(let collection, let record):
                    guard collections.contains(collection.rawValue) else { continue }
                    if cuts[collection.rawValue] != nil {
                        guard cuts[collection.rawValue]?.keeps(record) == true else { continue }
                        cutDigests[collection.rawValue, default: .empty].add(body: record.body)
                    }
                    try insert(record, into: collection.rawValue)
                    bundled?.keep(record)
                    inserted += 1
                    if inserted % 4096 == 0 && cancelled() { throw CancellationError() }
                case .blob, .blobBytes, .blobEnd:
                    try bundled?.take(item)
                }
            }
            // Read to its verified end: each collection's digest is known (the reader's, or of the records a cut kept).
            for name in collections {
                let whole = reader.digests[try CollectionName(name)]
                guard let digest = cuts[name] != nil ? cutDigests[name, default: .empty] : whole else {
                    throw ReplicaError(.snapshot, "the bundled snapshot gave no digest for the collection", evidence: name)
                }
                try setDigest(digest, of: name)
            }
            bundled?.commit()
        } catch let error as WireError {
            throw ReplicaError(.snapshot, "the bundled snapshot fails its checks", evidence: "\(snapshot.lastPathComponent): \(error)")
        } catch let failure as ApplyFailure {
            throw ReplicaError(.snapshot, "the bundled snapshot fails its checks", evidence: "\(snapshot.lastPathComponent): \(failure.reason)")
        }
    }

    /// Streams an answer's records into the open transaction.
    private func apply(_ answer: Answer, to collection: String, changed: inout ChangedIDs, cancelled: () -> Bool) throws -> CollectionOutcome {
        guard let handle = FileHandle(forReadingAtPath: answer.file.path) else {
            throw ReplicaError(.store, "the downloaded answer vanished", evidence: answer.file.path)
        }
        defer { try? handle.close() }
        if answer.mode == .full { try clear(collection) }
        var digest = answer.mode == .full ? StateDigest.empty : try self.digest(of: collection)
        var decoder = ContentDecoder()
        var body = EnvelopeReader(collection: try CollectionName(collection))
        var upserted = 0
        var hidden = 0
        func drain() throws {
            while let record = try body.next() {
                changed.insert(record.id)
                if record.hidden {
                    guard answer.mode == .delta else {
                        throw ApplyFailure(.invalidRecord("a full dataset holds the hidden record \(String(reflecting: record.id))"))
                    }
                    try remove(record.id, from: collection, digest: &digest)
                    hidden += 1
                } else {
                    if answer.mode == .full {
                        try insert(record, into: collection)
                        digest.add(body: record.body)
                    } else {
                        try upsert(record, into: collection, digest: &digest)
                    }
                    upserted += 1
                }
                if (upserted + hidden) % 4096 == 0 && cancelled() { throw CancellationError() }
            }
        }
        do {
            while let chunk = try handle.read(upToCount: 1 << 20), !chunk.isEmpty {
                try decoder.decode(chunk) { try body.feed($0) }
                try drain()
            }
            try decoder.finish()
            try body.finish()
            try drain()
        } catch let error as WireError {
            throw ApplyFailure(error.kind == .record ? .invalidRecord(error.description) : .undecodableBody(error.description))
        }
        try check(digest, answer.digest, of: collection)
        try setDigest(digest, of: collection)
        return answer.mode == .full ? .replaced(records: upserted) : .applied(upserted: upserted, hidden: hidden)
    }
}

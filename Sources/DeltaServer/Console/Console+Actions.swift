import DeltaAuthoring
import DeltaCore
import DeltaRules
import DeltaStore
import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore

/// The console's actions: hide or un-hide a record, compact, install rules, bake a snapshot.
/// Each is the owner's, confirmed in the page first, and written to the server's log.
extension Console {
    /// `POST /console/api/record/hide` (or `unhide`) with `{"collection": …, "id": …}`: one
    /// commit, as the owner's `DELETE` (or a `PUT` of the record's own content, visible) would make.
    func setHidden(_ request: Request, _ hidden: Bool) async throws -> Response {
        let body = try await Self.jsonBody(request, limit: 64 << 10)
        guard let name = body["collection"]?.text, let given = body["id"]?.text else {
            throw Problem.badRequest("console-body", "console: give {\"collection\": …, \"id\": …}")
        }
        let id = try Self.recordID(given)
        let collection: CollectionName
        do { collection = try CollectionName(name) } catch { throw Problem.badRequest("console-parameter", "console: collection: \(error)") }
        let commit = try await store.write(to: collection) { transaction in
            guard let current = try await transaction.stored(id) else {
                throw Problem(.notFound, "not-found", "console: \(collection)/\(id): no such record")
            }
            if hidden {
                try await transaction.hide(id: id)
            } else if current.record.hidden {
                try await transaction.upsert(Record(id: id, hidden: false, canonicalBody: current.record.body))
            }
        }.commit
        longPoll.nudge()
        logger.notice(
            "console: \(hidden ? "hid" : "brought back") a record",
            metadata: ["collection": "\(collection)", "id": "\(id)", "etag": "\(commit.token.entityTag)"])
        return ConsoleResponse.json(
            .members(["committed": .bool(commit.committed), "etag": .string(commit.token.entityTag), "position": .int(commit.token.position)]))
    }

    /// `POST /console/api/compact` with `{"olderThan": "30d"}` or `{"before": position}`, and
    /// `"dropBaked"` and `"dryRun"` (default true: a run that changes something says so).
    func compact(_ request: Request) async throws -> Response {
        let body = try await Self.jsonBody(request, limit: 64 << 10)
        let position: UInt64
        if let age = body["olderThan"]?.text {
            guard let seconds = Compaction.duration(age) else {
                throw Problem.badRequest("console-compact", "console: olderThan: a number and a unit s, m, h or d, as 30d, at most 1000 years (got \(age))")
            }
            position = try await store.position(committedBefore: Date().addingTimeInterval(-seconds))
        } else if case .number(let text)? = body["before"], let before = UInt64(text) {
            position = before
        } else {
            throw Problem.badRequest("console-compact", "console: give the horizon as {\"olderThan\": \"30d\"} or {\"before\": <position>}")
        }
        let dryRun = body["dryRun"] != .bool(false)
        let report = try await store.compact(before: position, dropBaked: body["dropBaked"] == .bool(true), dryRun: dryRun)
        if !dryRun {
            logger.notice(
                "console: compacted",
                metadata: [
                    "horizon": "\(report.horizon)", "hidden": "\(report.droppedHidden)", "versions": "\(report.droppedVersions)",
                    "blobs": "\(report.droppedBlobs)",
                ])
        }
        let bakes = try await store.bakes()
        func list(_ bakes: [BakedSnapshot]) -> JSONValue {
            .array(
                bakes.map {
                    .members([
                        "collection": .string($0.collection.rawValue), "etag": .string($0.entityTag), "position": .int($0.position),
                        "bakedAt": .time($0.bakedAt),
                    ])
                })
        }
        return ConsoleResponse.json(
            .members([
                "dryRun": .bool(report.dryRun), "asked": .int(position), "previousHorizon": .int(report.previousHorizon), "horizon": .int(report.horizon),
                "droppedHidden": .int(report.droppedHidden), "droppedVersions": .int(report.droppedVersions), "droppedBlobs": .int(report.droppedBlobs),
                "droppedBlobBytes": .int(report.droppedBlobBytes), "keptFor": list(report.keptFor), "expiredBakes": list(report.expiredBakes),
                "validBakes": list(bakes.filter { $0.position >= report.horizon && !report.expiredBakes.contains($0) }),
            ]))
    }

    /// `POST /console/api/rules` with a rules file as its body (`?check=true`: only checked):
    /// an error names its place in the file as a JSON Pointer; installed, every server on the
    /// database follows it within a second.
    func installRules(_ request: Request) async throws -> Response {
        let body: ByteBuffer
        do { body = try await request.body.collect(upTo: Rules.maximumBytes + 1) } catch {
            throw Problem(.contentTooLarge, "invalid-rules", "rules: the file is larger than \(Rules.maximumBytes) bytes")
        }
        let rules: Rules
        do { rules = try Rules(parsing: body.readableBytesView) } catch let error as WireError {
            throw Problem(
                .unprocessableContent, "invalid-rules", "rules: \(error.reason)",
                values: [("pointer", error.pointer.map { .string($0) } ?? .null), ("evidence", error.evidence.map { .string($0) } ?? .null)])
        } catch {
            throw Problem(.unprocessableContent, "invalid-rules", "rules: \(error)")
        }
        let collections = JSONValue.array(rules.collections.keys.sorted().map { .string($0) })
        if Self.query(request, "check") == "true" {
            return ConsoleResponse.json(
                .members([
                    "checked": .bool(true), "digest": .string(rules.digest), "collections": collections, "enforcedHere": .bool(configuration.liveRules != nil),
                ]))
        }
        let before = try await store.currentRules()?.version
        let version = try await store.installRules(rules)
        if version != before { logger.notice("console: installed rules", metadata: ["version": "\(version)", "digest": "\(rules.digest)"]) }
        // Only servers that verify users enforce rules: say so when this one does not.
        return ConsoleResponse.json(
            .members([
                "installed": .bool(version != before), "version": .int(version), "digest": .string(rules.digest), "collections": collections,
                "enforcedHere": .bool(configuration.liveRules != nil),
            ]))
    }

    /// `POST /console/snapshot` (a form: `csrf`, `collection`): the collection's snapshot file,
    /// streamed as it is baked, and its token recorded as a bake, as `deltasnap bake --db` does,
    /// so that compaction keeps it valid. Only a collection everyone may read: a snapshot ships in
    /// every copy of an app, and a restricted collection's is baked for a user with
    /// `deltasnap bake --as-claims`.
    func snapshot(_ request: Request, _ form: ConsoleForm?) async throws -> Response {
        guard let name = form?.fields["collection"] else {
            throw Problem.badRequest("console-form", "console: the form must name the collection")
        }
        let collection: CollectionName
        do { collection = try CollectionName(name) } catch { throw Problem.badRequest("console-parameter", "console: collection: \(error)") }
        // As this server answers reads: public unless the rules it enforces restrict the collection.
        if let rules = enforcedRules?.rules, !rules.isPublic(collection) {
            throw Problem(
                .forbidden, "console-not-public",
                "console: \(collection) is not read by everyone: its snapshot would ship rows some users may not read (bake a user's with deltasnap bake --as-claims)"
            )
        }
        let read = try await store.openFullRead([collection])
        guard let entry = read.collections.first else {
            read.close()
            throw Problem(.notFound, "not-found", "console: \(collection): no such collection")
        }
        let manifest: SnapshotManifest
        do {
            manifest = try SnapshotManifest(collections: [
                .init(name: entry.name, entityTag: entry.token.entityTag, lastModified: entry.token.lastModified, records: entry.records, digest: entry.digest)
            ])
        } catch {
            read.close()
            throw error
        }
        try await store.recordBakes([(entry.name, entry.token)])
        logger.notice("console: baked a snapshot", metadata: ["collection": "\(collection)", "etag": "\(entry.token.entityTag)"])
        let filename = "\(collection.rawValue).deltasnap"
        return Response(
            status: .ok,
            headers: [
                .contentType: "application/octet-stream", .contentDisposition: "attachment; filename=\"\(filename)\"",
                HTTPField.Name("Delta-Snapshot-ETag")!: entry.token.entityTag,
            ],
            body: ResponseBody { writer in
                defer { read.close() }
                let pending = PendingBytes()
                let snapshot = try SnapshotWriter(manifest: manifest) { pending.bytes.append(contentsOf: $0) }
                while let batch = try await read.next(entry.name, maximumBytes: 1 << 16) {
                    try batch.forEach { body, _ in try snapshot.append(body: body) }
                    if !pending.bytes.isEmpty { try await writer.write(ByteBuffer(bytes: pending.take())) }
                }
                try snapshot.finish()
                if !pending.bytes.isEmpty { try await writer.write(ByteBuffer(bytes: pending.take())) }
                try await writer.finish(nil)
            })
    }
}

/// Compressed bytes a `SnapshotWriter` produced, waiting to be written to the response.
private final class PendingBytes {
    var bytes: [UInt8] = []

    /// The bytes, leaving none.
    func take() -> [UInt8] {
        defer { bytes = [] }
        return bytes
    }
}

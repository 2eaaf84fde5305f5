import DeltaCore
import DeltaStore
import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import Prometheus

/// `PUT /api/{collection}/{id}`, `DELETE /api/{collection}/{id}`, `POST /api/{collection}`: the data owner's writes.
struct WriteRoutes: RulesPinned {
    let store: any ChangeReader & ChangeWriter
    /// The settings; `rules` pinned for each request (`RulesPinned`).
    var configuration: ServerConfiguration
    let metrics: ServerMetrics

    /// Upserts one record; the path id must equal the body's `"id"`. An app (the client key)
    /// must send `If-Match` (or `If-None-Match: *` to create): `428` without, `412` when stale.
    func put(_ request: Request, context: some RequestContext, credential: Credential) async throws -> Response {
        let collection = try collectionName(context)
        let id = try recordID(context)
        let precondition = try authorizeRecordWrite(request, credential, collection)
        let body = try await collect(request, configuration)
        let record = try Record(parsing: body.readableBytesView)
        try configuration.recordSize.check(record)
        guard record.id.utf8.elementsEqual(id.utf8) else {
            throw Problem.badRequest(
                "id-mismatch", "record: the body's \"id\" differs from the path (body \(String(reflecting: record.id)), path \(String(reflecting: id)))")
        }
        // A user's write is decided under one version of the rules: again, whole, under newer
        // ones when the write transaction finds them (`decidingAgainOnNewerRules`).
        let commit = try await decidingAgainOnNewerRules(store) { configuration -> CommitResult in
            try credential.mayWrite(collection, configuration)
            let principal = try credential.principal(configuration)
            return try await store.write(to: collection) { transaction in
                let current = try await current(id, transaction, principal, precondition, blobs: record.body.containsBlobMarker)
                let (stamped, seen) = try await decide(principal, collection, put: record, id: id, current: current, transaction)
                let written = stamped ?? record
                try precondition.check(id, in: collection, current: current, seen: seen)
                if written.body.containsBlobMarker {
                    try await checkBlobs(written, transaction, user: principal.subject, previous: seen)
                }
                try await transaction.upsert(written)
            }.commit
        }
        return summary(commit)
    }

    /// Hides one record: it stays as a tombstone and clients receive it with `"hidden": true`.
    /// Preconditions as for `put`.
    func delete(_ request: Request, context: some RequestContext, credential: Credential) async throws -> Response {
        let collection = try collectionName(context)
        let id = try recordID(context)
        let precondition = try authorizeRecordWrite(request, credential, collection)
        let commit = try await decidingAgainOnNewerRules(store) { configuration -> CommitResult in
            try credential.mayWrite(collection, configuration)
            let principal = try credential.principal(configuration)
            return try await store.write(to: collection) { transaction in
                let current = try await current(id, transaction, principal, precondition, blobs: false)
                let (_, seen) = try await decide(principal, collection, put: nil, id: id, current: current, transaction)
                try precondition.check(id, in: collection, current: current, seen: seen)
                try await transaction.hide(id: id)
            }.commit
        }
        return summary(commit)
    }

    /// Upserts a JSON array of records as one commit; each may carry `"hidden": true/false`. The
    /// owner's alone (`Route.access`).
    func post(_ request: Request, context: some RequestContext) async throws -> Response {
        let collection = try collectionName(context)
        let body = try await collect(request, configuration)
        var reader = RecordReader()
        reader.feed(body.readableBytesView)
        reader.finish()
        guard body.readableBytesView.first(where: { ![0x20, 0x09, 0x0A, 0x0D].contains($0) }) == UInt8(ascii: "[") else {
            throw Problem.badRequest("invalid-batch", "batch: the body must be a JSON array of records")
        }
        let size = configuration.recordSize
        let result = try await store.write(to: collection) { transaction in
            while let record = try reader.next() {
                try size.check(record)
                try await checkBlobs(record, transaction)
                try await transaction.upsert(record)
            }
        }
        return summary(result.commit)
    }

    /// The record `id` as the write transaction finds it, read only when something decides on
    /// it: a precondition, the rules (users, and the client key's privacy of what a `412`
    /// shows), or blob references (a user's may keep those of the version they replace). The
    /// owner's unconditional write decides nothing on it, and reads nothing before it writes.
    private func current(
        _ id: String, _ transaction: any WriteTransaction, _ principal: Principal, _ precondition: Precondition, blobs: Bool
    ) async throws -> StoredRecord? {
        if case .owner = principal, precondition == .none, !blobs { return nil }
        return try await transaction.stored(id)
    }

    /// The credential's rights on `collection`, and the precondition the request carries
    /// (required of apps: `428` without one).
    private func authorizeRecordWrite(_ request: Request, _ credential: Credential, _ collection: CollectionName) throws -> Precondition {
        try credential.mayWrite(collection, configuration)
        let precondition = try Precondition(request.headers)
        if credential != .owner, precondition == .none {
            throw Problem(
                .preconditionRequired, "precondition-required",
                "writes: an app must say which version it changes: If-Match with the record's ETag (GET /api/\(collection)/{id}), or If-None-Match: * to create"
            )
        }
        return precondition
    }

    /// Decides `principal`'s `put` (or, with nil, `delete`) over `current` in the write
    /// transaction: `403 denied` when a user's rules refuse it; else the record to write (a
    /// user's, stamped) and what the writer may read of `current` (`Principal.decide`), the only
    /// thing of it a `412` may show. A user's delete of a record that is missing, or that they
    /// may not read, is `404` either way, before any precondition is looked at: the answer
    /// never tells the two apart.
    private func decide(
        _ principal: Principal, _ collection: CollectionName, put record: Record?, id: String, current: StoredRecord?, _ transaction: any WriteTransaction
    ) async throws -> (written: Record?, seen: Record?) {
        let missing = Problem(.notFound, "not-found", "record \(String(reflecting: id)) in \(collection): does not exist")
        if principal.subject != nil && record == nil && current == nil { throw missing }
        var context = UserWrite.Context()
        switch try await principal.decide(collection, put: record, stored: current?.record, in: transaction, context: &context) {
        case .allowed(let stamped, let visible): return (stamped, visible)
        case .denied(_, nil) where record == nil: throw missing
        case .denied(let rule, _):
            throw Problem(
                .forbidden, "denied", "record \(String(reflecting: id)) in \(collection): the rules' \"\(rule)\" does not allow this write",
                extensions: [("rule", rule)])
        }
    }

    /// `400 invalid-blob` for a malformed blob reference, `409 blob-missing` for a reference to a
    /// blob the server does not hold, or, for a `user`, one they neither uploaded nor found in the
    /// record's `previous` version: the same answer, so a hash alone tells nothing (docs/PROTOCOL.md, "Files").
    private func checkBlobs(_ record: Record, _ transaction: any WriteTransaction, user: String? = nil, previous: Record? = nil) async throws {
        switch try await transaction.blobRefusal(record, user: user, previous: previous) {
        case nil: return
        case .invalid(let error)?: throw Problem(.badRequest, "invalid-blob", "record \(String(reflecting: record.id)): \(error)")
        case .missing(let hashes)?:
            throw Problem(
                .conflict, "blob-missing", "record \(String(reflecting: record.id)): \(BlobRefusal.missing(hashes))",
                values: [("missing", .array(hashes.map { .string($0.hex) }))])
        }
    }

    private func summary(_ commit: CommitResult) -> Response {
        if commit.committed { metrics.headPosition.set(Int64(commit.token.position)) }
        let object = JSONValue.object([
            JSONMember(key: "committed", value: .bool(commit.committed)),
            JSONMember(key: "etag", value: .string(commit.token.entityTag)),
            JSONMember(key: "hidden", value: .number(String(commit.hidden))),
            JSONMember(key: "lastModified", value: .string(commit.token.lastModified)),
            JSONMember(key: "position", value: .number(String(commit.token.position))),
            JSONMember(key: "unchanged", value: .number(String(commit.unchanged))),
            JSONMember(key: "upserted", value: .number(String(commit.upserted))),
        ])
        var bytes = object.canonicalBytes
        bytes.append(UInt8(ascii: "\n"))
        return Response(
            status: .ok,
            headers: [.contentType: "application/json", .cacheControl: "no-store", .contentLength: String(bytes.count)],
            body: .init(byteBuffer: ByteBuffer(bytes: bytes)))
    }
}

/// The request body as JSON, refusing more than the configured limit before reading it when possible.
func collect(_ request: Request, _ configuration: ServerConfiguration) async throws -> ByteBuffer {
    let limit = configuration.maximumBodyBytes
    // The media type is what comes before any parameter: "application/json; charset=utf-8" is JSON, "application/jsonx" is not.
    if let type = request.headers[.contentType]?.lowercased(),
        type.split(separator: ";", maxSplits: 1, omittingEmptySubsequences: false)[0].trimmingCharacters(in: .whitespaces) != "application/json"
    {
        throw Problem(.unsupportedMediaType, "unsupported-media-type", "request body: must be application/json (got \(String(reflecting: type)))")
    }
    if let length = request.headers[.contentLength].flatMap({ Int($0) }), length > limit {
        throw Problem(.contentTooLarge, "too-large", "request body: larger than the limit (\(length) bytes, limit \(limit))")
    }
    do {
        return try await request.body.collect(upTo: limit)
    } catch let error as HTTPError where error.status == .contentTooLarge {
        throw Problem(.contentTooLarge, "too-large", "request body: larger than the limit (limit \(limit) bytes)")
    }
}

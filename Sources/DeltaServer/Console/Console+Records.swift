import DeltaCore
import DeltaStore
import Foundation
import Hummingbird

/// The console's collection and record pages: records page by page, filtered as `?filter=`
/// filters, and one record's versions, with who pushed each.
extension Console {
    /// `GET /console/api/records?collection=&after=&filter=`: at most `pageRecords` records in id
    /// order (hidden ones too) after `after`, those `filter` matches; at most `examinedRecords`
    /// are examined, and `next` says where to go on.
    func records(_ request: Request) async throws -> Response {
        let collection = try Self.collection(request)
        var after = Self.query(request, "after")
        let filter: Filter?
        if let text = Self.query(request, "filter") {
            do { filter = try Filter(parsing: text) } catch { throw Problem.badRequest("invalid-filter", "filter: \(error)") }
        } else {
            filter = nil
        }
        let matcher = filter.map(FilterMatcher.init)
        var found: [PagedRecord] = []
        var examined = 0
        var examinedBytes = 0
        var more = true
        scan: while found.count < Self.pageRecords, examined < Self.examinedRecords, examinedBytes < Self.examinedBytes {
            let wanted = matcher == nil ? Self.pageRecords - found.count : min(500, Self.examinedRecords - examined)
            let batch = try await store.recordPage(collection, after: after, limit: wanted, maximumBytes: Self.batchBytes)
            if batch.isEmpty {
                more = false
                break
            }
            for record in batch {
                examined += 1
                examinedBytes += record.record.body.count
                after = record.record.id
                if matcher?.matches(body: record.record.body) ?? true { found.append(record) }
                if found.count == Self.pageRecords { break scan }
            }
        }
        if more { more = try await !store.recordPage(collection, after: after, limit: 1, maximumBytes: 0).isEmpty }
        return ConsoleResponse.json(
            .members([
                "collection": .string(collection.rawValue),
                "records": .array(try found.map(Self.json)),
                "examined": .int(examined),
                "next": more ? .string(after ?? "") : .null,
            ]))
    }

    /// `GET /console/api/record?collection=&id=`: the record's kept versions, newest first, each
    /// with the push that wrote it (user, client, mutation) when one did, and the blobs it references.
    func record(_ request: Request) async throws -> Response {
        let collection = try Self.collection(request)
        let id = try Self.recordID(try Self.parameter(request, "id"))
        let versions = try await store.history(of: id, in: collection, limit: 100, maximumBytes: Self.batchBytes)
        guard let current = versions.first(where: \.current) else {
            throw Problem(.notFound, "not-found", "console: \(collection)/\(id): no such record")
        }
        // The log from the oldest version shown on: a hot record's older mutations are not read.
        let oldest = versions.map(\.position).min() ?? 1
        let log = try await store.mutationLog(collection, id: id, after: oldest - 1, limit: 10_000)
        let pushes = Dictionary(log.map { ($0.position, $0) }, uniquingKeysWith: { $1 })
        let blobs = try Record(id: id, hidden: current.hidden, canonicalBody: current.body).blobReferences()
        return ConsoleResponse.json(
            .members([
                "collection": .string(collection.rawValue), "id": .string(id), "hidden": .bool(current.hidden),
                "versions": .array(
                    try versions.map { version in
                        let push = pushes[version.position].map { push in
                            JSONValue.members([
                                "user": push.user.map { .string($0) } ?? .null, "client": .string(push.client), "mutation": .int(push.mutation),
                                "operation": .string(push.operation),
                            ])
                        }
                        return .object(
                            [
                                JSONMember(key: "position", value: .int(version.position)), JSONMember(key: "time", value: .time(version.time)),
                                JSONMember(key: "hidden", value: .bool(version.hidden)), JSONMember(key: "current", value: .bool(version.current)),
                            ] + (try Self.body(version.body, whole: version.current ? Self.wholeBytes : Self.previewBytes))
                                + [JSONMember(key: "push", value: push ?? .null)])
                    }),
                "blobs": .array(blobs.map(\.json)),
            ]))
    }

    /// A record of a page as JSON.
    static func json(_ record: PagedRecord) throws -> JSONValue {
        .object(
            [
                JSONMember(key: "id", value: .string(record.record.id)), JSONMember(key: "hidden", value: .bool(record.record.hidden)),
                JSONMember(key: "position", value: .int(record.position)),
            ] + (try body(record.record.body, whole: previewBytes)))
    }

    /// A body as JSON members: `body` whole when at most `whole` bytes, else `preview` (its
    /// first kilobyte of text) and `bytes`, so that one large record never makes a page large.
    static func body(_ body: [UInt8], whole: Int) throws -> [JSONMember] {
        if body.count <= whole { return [JSONMember(key: "body", value: try JSONValue(parsing: body))] }
        // Cut before a continuation byte, so that no character is split.
        var end = min(1_024, body.count)
        while end > 0, end < body.count, body[end] & 0xC0 == 0x80 { end -= 1 }
        let preview = String(decoding: body.prefix(end), as: UTF8.self)
        return [
            JSONMember(key: "body", value: .null), JSONMember(key: "preview", value: .string(preview + "…")),
            JSONMember(key: "bytes", value: .int(body.count)),
        ]
    }
}

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
        var after = request.uri.queryParameters["after"].map(String.init).flatMap { $0.isEmpty ? nil : $0 }
        let filter: Filter?
        if let text = request.uri.queryParameters["filter"].map(String.init), !text.isEmpty {
            do { filter = try Filter(parsing: text) } catch { throw Problem.badRequest("invalid-filter", "filter: \(error)") }
        } else {
            filter = nil
        }
        let matcher = filter.map(FilterMatcher.init)
        var found: [PagedRecord] = []
        var examined = 0
        var more = true
        scan: while found.count < Self.pageRecords, examined < Self.examinedRecords {
            let wanted = matcher == nil ? Self.pageRecords - found.count : min(500, Self.examinedRecords - examined)
            let batch = try await store.recordPage(collection, after: after, limit: wanted)
            for record in batch {
                examined += 1
                after = record.record.id
                if matcher?.matches(body: record.record.body) ?? true { found.append(record) }
                if found.count == Self.pageRecords { break scan }
            }
            if batch.count < wanted {
                more = false
                break
            }
        }
        if more { more = try await !store.recordPage(collection, after: after, limit: 1).isEmpty }
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
        let id = try Self.parameter(request, "id")
        let versions = try await store.history(of: id, in: collection, limit: 100)
        guard let current = versions.first(where: \.current) else {
            throw Problem(.notFound, "not-found", "console: \(collection)/\(id): no such record")
        }
        let log = try await store.mutationLog(collection, id: id, after: 0, limit: 10_000)
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
                        return .members([
                            "position": .int(version.position), "time": .time(version.time), "hidden": .bool(version.hidden), "current": .bool(version.current),
                            "body": try JSONValue(parsing: version.body), "push": push ?? .null,
                        ])
                    }),
                "blobs": .array(blobs.map(\.json)),
            ]))
    }

    /// A record of a page as JSON.
    static func json(_ record: PagedRecord) throws -> JSONValue {
        .members([
            "id": .string(record.record.id), "hidden": .bool(record.record.hidden), "position": .int(record.position),
            "body": try JSONValue(parsing: record.record.body),
        ])
    }
}

import DeltaCore
import Foundation

extension Replica {
    /// The collection `name` as `Model` values: the models are the records' JSON (their `id` must
    /// encode as a JSON string, as a `String` or `UUID` does).
    ///
    /// ```swift
    /// struct Task: Codable, Sendable, Identifiable { var id: String; var title: String; var done: Bool }
    /// let tasks = replica.collection(Task.self, named: "tasks")
    /// let open = try await tasks.query(filter: .compare(member: "done", .eq, false), order: [.ascending("title")], limit: 50)
    /// ```
    public func collection<Model: Codable & Sendable & Identifiable>(_ type: Model.Type, named name: String) -> ReplicaCollection<Model>
    where Model.ID: RecordIdentifier {
        ReplicaCollection(replica: self, name: name)
    }
}

/// One collection of a replica as `Codable` models: get, query, count, put, delete and observe,
/// all `async`, all off the caller's thread. A record that does not decode is left out of a
/// result and reported (in `TypedResult.skipped` and as a `SyncEvent.undecodable`), never
/// failing the whole result.
public struct ReplicaCollection<Model: Codable & Sendable & Identifiable>: Sendable where Model.ID: RecordIdentifier {
    /// The replica.
    public let replica: Replica
    /// The collection's name.
    public let name: String
    /// How models become records (`.sortedKeys` is not needed: records are stored canonical).
    public var encoder = JSONEncoder()
    /// How records become models.
    public var decoder = JSONDecoder()

    /// The model `id`, or nil when there is none; throws when its record does not decode.
    public func get(_ id: Model.ID) async throws -> Model? {
        guard let record = try await replica.record(id.recordID, in: name) else { return nil }
        do { return try decoder.decode(Model.self, from: Data(record.body)) } catch {
            throw ReplicaError(.decoding, "the record does not decode as \(Model.self)", evidence: "\(name)/\(record.id): \(error)")
        }
    }

    /// The models `filter` selects, in `order` (then by id), skipping `offset`, after `cursor`,
    /// at most `limit`.
    public func query(
        filter: Filter? = nil, order: [RecordQuery.SortKey] = [], limit: Int? = nil, offset: Int = 0, after cursor: RecordQuery.Cursor? = nil
    ) async throws -> TypedResult<Model> {
        let query = RecordQuery(name, filter: filter, order: order, limit: limit, offset: offset, after: cursor)
        return await decodeInParts(try await replica.query(query), of: query)
    }

    /// How many records `filter` selects (all of them without one), counted without loading them.
    public func count(filter: Filter? = nil) async throws -> Int {
        try await background { [replica, name] in try replica.reader.count(name, filter: filter) }
    }

    /// Writes `model` as its record, offline too; see `Replica.put`.
    public func put(_ model: Model) async throws { try await put([model]) }

    /// Writes `models` in one transaction: all or none.
    public func put(_ models: [Model]) async throws {
        try await replica.put(try models.map { try Replica.record(encoding: $0, encoder) }, in: name)
    }

    /// Deletes the model `id`, offline too; see `Replica.delete`.
    public func delete(_ id: Model.ID) async throws { try await replica.delete(id.recordID, in: name) }

    /// `query`'s result at once and again each time it changes; see `Replica.observe`.
    ///
    /// Its models are decoded with `decoder`'s settings as they are when `observe` is called: a
    /// change to them afterwards applies to the next `observe`, not to this one (a live query
    /// keeps the models of records that did not change, so every model it gives comes from the
    /// same settings).
    public func observe(
        filter: Filter? = nil, order: [RecordQuery.SortKey] = [], limit: Int? = nil, offset: Int = 0
    ) -> AsyncThrowingStream<TypedResult<Model>, any Error> {
        observe(RecordQuery(name, filter: filter, order: order, limit: limit, offset: offset))
    }

    /// `query`'s typed results, decoded with `decoder`'s settings as they are now.
    func observe(_ query: RecordQuery) -> AsyncThrowingStream<TypedResult<Model>, any Error> {
        guard let pinned = pinned() else {
            // A decoder whose settings cannot be copied: every result decoded whole, with them as they are then.
            return replica.observe(query, updating: { [self] records, _ in decode(records, of: query) })
        }
        return replica.observe(query, updating: { records, previous in pinned.decode(records, of: query, reusing: previous) })
    }

    /// This collection with a decoder of its own, set as `decoder` is now, which nothing else
    /// can change: a live query that keeps models decoded before would otherwise mix models of
    /// old settings with models of new ones. Nil when `decoder` is a subclass of `JSONDecoder`,
    /// whose settings cannot all be copied.
    func pinned() -> ReplicaCollection? {
        guard type(of: decoder) == JSONDecoder.self else { return nil }
        let copy = JSONDecoder()
        copy.dateDecodingStrategy = decoder.dateDecodingStrategy
        copy.dataDecodingStrategy = decoder.dataDecodingStrategy
        copy.nonConformingFloatDecodingStrategy = decoder.nonConformingFloatDecodingStrategy
        copy.keyDecodingStrategy = decoder.keyDecodingStrategy
        copy.userInfo = decoder.userInfo
        copy.allowsJSON5 = decoder.allowsJSON5
        copy.assumesTopLevelDictionary = decoder.assumesTopLevelDictionary
        var pinned = self
        pinned.decoder = copy
        return pinned
    }

    /// The records as models, those that do not decode left out, reported and counted.
    ///
    /// With `previous` (a live query's result before, and its models), a record whose id and
    /// body are byte for byte those of a record before keeps that record's model: after a put,
    /// a live query of 5,000 models decodes one, not 5,000 (`reused`).
    func decode(_ records: [Record], of query: RecordQuery, reusing previous: (records: [Record], value: TypedResult<Model>)? = nil) -> TypedResult<Model> {
        let full = query.limit.map { records.count == $0 } ?? false
        let next = full ? records.last.map(query.cursor(after:)) : nil
        if let previous, let known = Self.reused(records, previous), known.missing * 2 <= records.count {
            var items: [Model] = []
            var skipped: [SkippedRecord] = []
            items.reserveCapacity(records.count)
            let (models, direct) = (previous.value.items, RecordDecoder.stands(in: decoder))
            for (record, before) in zip(records, known.indexes) {
                if before >= 0 {
                    items.append(models[before])
                } else if let model = decodeOne(record, direct: direct, into: &skipped) {
                    items.append(model)
                }
            }
            return TypedResult(items: items, skipped: skipped, next: next)
        }
        var items: [Model] = []
        var skipped: [SkippedRecord] = []
        items.reserveCapacity(records.count)
        // `RecordDecoder` reads each record's canonical bytes directly (a call per record costs
        // it less than one call over a joined array would: no array of element positions, no
        // coding path per element); a record it cannot read goes to `JSONDecoder` alone.
        let direct = RecordDecoder.stands(in: decoder)
        if !direct {
            // `JSONDecoder` is called once for the whole result (a JSON array of the bodies):
            // a call per record costs it about as much again as the records themselves.
            var array: [UInt8] = [UInt8(ascii: "[")]
            array.reserveCapacity(records.reduce(2) { $0 + $1.body.count + 1 })
            for (index, record) in records.enumerated() {
                if index > 0 { array.append(UInt8(ascii: ",")) }
                array.append(contentsOf: record.body)
            }
            array.append(UInt8(ascii: "]"))
            if let all = try? decoder.decode([Model].self, from: Data(array)) { return TypedResult(items: all, skipped: [], next: next) }
        }
        // Only when a record does not decode is it decoded on its own, to leave it out.
        for record in records {
            if let item = decodeOne(record, direct: direct, into: &skipped) { items.append(item) }
        }
        return TypedResult(items: items, skipped: skipped, next: next)
    }

    /// `record` as a model; nil when it does not decode, then added to `skipped` and reported.
    /// `direct`: whether `RecordDecoder` stands in for `decoder` (`RecordDecoder.stands(in:)`).
    private func decodeOne(_ record: Record, direct: Bool, into skipped: inout [SkippedRecord]) -> Model? {
        if direct, let item = try? RecordDecoder.decode(Model.self, from: record.body) { return item }
        do { return try decoder.decode(Model.self, from: Data(record.body)) } catch {
            skipped.append(SkippedRecord(id: record.id, reason: "\(error)"))
            replica.emit(.undecodable(collection: name, id: record.id, reason: "\(error)"))
            return nil
        }
    }

    /// For each of `records`, the index in `previous`'s models of the model of the same record
    /// (same id and body, byte for byte), which it keeps, or -1; found by walking both results
    /// in order (a live query's next result mostly keeps its records and their order), and by id
    /// where the walk is out of step; and how many have none. A record that did not decode
    /// before has no model to keep: it is decoded again. Nil when `previous`'s models and
    /// skipped records do not account for its records, and for models that are objects (the app
    /// may have changed one it was given).
    static func reused(
        _ records: [Record], _ previous: (records: [Record], value: TypedResult<Model>)
    ) -> (indexes: [Int], missing: Int)? {
        let old = previous.records
        // A model that is an object may have been changed by the app since: never handed back.
        guard !(Model.self is AnyObject.Type) else { return nil }
        // Each old record's model, or -1 for those that did not decode (skipped, in the same order).
        var models: [Int]?
        let skipped = previous.value.skipped
        if !skipped.isEmpty {
            var (next, model) = (0, 0)
            models = old.map { record in
                if next < skipped.count, skipped[next].id.hasSameBytes(as: record.id) {
                    next += 1
                    return -1
                }
                defer { model += 1 }
                return model
            }
            guard next == skipped.count, model == previous.value.items.count else { return nil }
        } else {
            guard previous.value.items.count == old.count else { return nil }
        }
        var found = [Int](repeating: -1, count: records.count)
        var missing = records.count
        // Where each id stood before, by its bytes: built only when the walk meets a record out of step.
        var positions: [[UInt8]: Int]?
        var oldIndex = 0
        for (index, record) in records.enumerated() {
            var before: Int?
            if oldIndex < old.count, record.id.hasSameBytes(as: old[oldIndex].id) {
                before = oldIndex
            } else {
                // Records left, were added or moved: where did this one stand, if anywhere?
                if positions == nil {
                    positions = Dictionary(old.enumerated().map { (Array($0.element.id.utf8), $0.offset) }, uniquingKeysWith: { first, _ in first })
                }
                before = positions?[Array(record.id.utf8)]
            }
            guard let before else { continue }  // new to the result: decoded
            // Equal bodies: most share their storage with the record before, compared at once.
            let model = models.map { $0[before] } ?? before
            if model >= 0, record.body == old[before].body {
                found[index] = model
                missing -= 1
            }
            oldIndex = max(oldIndex, before + 1)
        }
        return (found, missing)
    }
}

@available(iOS 17, macOS 14, tvOS 17, watchOS 10, visionOS 1, *)
extension LiveQuery where Element: Codable & Identifiable, Element.ID: RecordIdentifier {
    /// Watches a typed query: its models, those that do not decode counted in `skipped`. Each
    /// time it starts following (at first and when `query` changes), it decodes with the
    /// collection's `decoder` settings as they are then; see `ReplicaCollection.observe`.
    public convenience init(
        _ collection: ReplicaCollection<Element>, filter: Filter? = nil, order: [RecordQuery.SortKey] = [], limit: Int? = nil, offset: Int = 0
    ) {
        let query = RecordQuery(collection.name, filter: filter, order: order, limit: limit, offset: offset)
        self.init(
            query,
            Source(
                read: { [reader = collection.replica.reader] query in collection.decode(try reader.query(query), of: query) },
                watch: { query in collection.observe(query) }))
    }
}

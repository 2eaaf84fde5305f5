import DeltaCore
import DeltaSQLiteStore
import DeltaStore
import DeltaTestSupport
import Foundation

/// One record as a test sees it: id, hidden flag, canonical body text.
struct Row: Equatable, CustomStringConvertible {
    let id: String
    let hidden: Bool
    let body: String
    var description: String { "\(id)\(hidden ? " (hidden)" : ""): \(body)" }
}

func record(_ json: String) throws -> Record { try Record(parsing: Array(json.utf8)) }

func name(_ text: String) -> CollectionName { try! CollectionName(text) }

/// Reads a feed to the end and closes it.
func drain(_ feed: any ChangeFeed) async throws -> [Row] {
    defer { feed.close() }
    var rows: [Row] = []
    while let batch = try await feed.next(maximumBytes: 100) {
        batch.forEach { body, hidden in
            let value = try! JSONValue(parsing: body)
            guard case .string(let id) = value["id"] else { fatalError("stored body without id") }
            rows.append(Row(id: id, hidden: hidden, body: String(decoding: body, as: UTF8.self)))
        }
    }
    return rows
}

extension ReadResult {
    /// The rows and token, when this is a feed; fails the caller otherwise.
    func rows() async throws -> (rows: [Row], token: Token, mode: FeedMode) {
        guard case .changes(let feed) = self else { throw TestFailure("expected changes, got \(self)") }
        return (try await drain(feed), feed.token, feed.mode)
    }
}

@discardableResult
func put(_ store: any ChangeStore, _ collection: String, _ records: String...) async throws -> CommitResult {
    let parsed = try records.map(record)
    return try await store.write(to: name(collection)) { transaction in
        for record in parsed { try await transaction.upsert(record) }
    }.commit
}

/// The current token the SQLite store's early verdict on `collection` since `since` answers
/// `304` with, nil when it does not say "not modified".
func earlyNotModified(_ store: SQLiteStore, _ collection: String = "widgets", since: Token) -> Token? {
    if case .notModified(let token, _) = store.earlyVerdict(name(collection), since: .token(since)) { return token }
    return nil
}

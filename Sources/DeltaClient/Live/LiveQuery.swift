import DeltaCore
import DeltaSQLite
import Foundation
import Observation

/// A query's current result, kept current: an `@Observable` object for SwiftUI views (read
/// `elements` in `body`) and UIKit alike (`withObservationTracking`, or iterate `Replica.observe`).
///
/// It reads the result at once, before `init` returns, so a view's first frame shows what is
/// on disk (not an empty list), then updates on the main actor each time the result changes
/// (see `Replica.observe`); it stops when it is released. Its `query` can change (a search
/// field's text, a sort the user picks): the new query's result is read at once and followed.
///
/// ```swift
/// @State var open = LiveQuery(replica, RecordQuery("tasks", filter: .compare(member: "done", .eq, false)))
/// // or typed: LiveQuery(replica.collection(Task.self, named: "tasks"), filter: …)
/// // later, as the user types: open.query.filter = .compare(member: "title", .gte, .string(text))
/// ```
@available(iOS 17, macOS 14, tvOS 17, watchOS 10, visionOS 1, *)
@MainActor @Observable
public final class LiveQuery<Element: Sendable> {
    /// The result as last read.
    public private(set) var elements: [Element] = []
    /// Whether `elements` holds a result yet (it does once `init` returns, unless the first read
    /// failed).
    public private(set) var isLoaded = false
    /// Records of the result that did not decode as `Element` and were left out (typed queries).
    public private(set) var skipped = 0
    /// Why the query stopped updating, if it did: the store could not be read.
    public private(set) var error: ReplicaError?

    /// The query followed. Setting it reads the new query's result at once and follows that
    /// one; `elements` never shows an empty list in between.
    public var query: RecordQuery {
        get {
            access(keyPath: \.query)
            return current
        }
        set {
            guard newValue != current else { return }
            withMutation(keyPath: \.query) { current = newValue }
            start()
        }
    }

    /// How results are read: once now (`read`), and followed (`watch`).
    struct Source: Sendable {
        let read: @Sendable (RecordQuery) throws -> TypedResult<Element>
        let watch: @Sendable (RecordQuery) -> AsyncThrowingStream<TypedResult<Element>, any Error>
    }

    @ObservationIgnored private var current: RecordQuery
    @ObservationIgnored private let source: Source
    @ObservationIgnored private let watcher = Locked<Task<Void, Never>?>(nil)

    init(_ query: RecordQuery, _ source: Source) {
        current = query
        self.source = source
        start()
    }

    /// Reads the query's result now, then follows it; the previous query's watch ends.
    private func start() {
        watcher.withLock { $0?.cancel() }
        do {
            show(try source.read(current))
            error = nil
        } catch {
            self.error = error as? ReplicaError ?? ReplicaError(.store, "a live query cannot read its result", evidence: "\(error)")
        }
        let results = source.watch(current)
        let task = Task { [weak self] in
            do {
                for try await result in results {
                    guard let self, !Task.isCancelled else { return }
                    self.show(result)
                }
            } catch {
                guard !Task.isCancelled else { return }
                self?.error = error as? ReplicaError ?? ReplicaError(.store, "a live query stopped", evidence: "\(error)")
            }
        }
        watcher.withLock { $0 = task }
    }

    private func show(_ result: TypedResult<Element>) {
        elements = result.items
        skipped = result.skipped.count
        isLoaded = true
    }

    /// Watches `query` on `replica`: its records, as they are stored.
    public convenience init(_ replica: Replica, _ query: RecordQuery) where Element == Record {
        self.init(
            query,
            Source(
                read: { [reader = replica.reader] query in TypedResult(items: try reader.query(query), skipped: [], next: nil) },
                watch: { query in replica.observe(query) { TypedResult(items: $0, skipped: [], next: nil) } }))
    }

    deinit { watcher.withLock { $0?.cancel() } }
}

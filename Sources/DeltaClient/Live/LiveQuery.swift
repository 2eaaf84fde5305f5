import DeltaCore
import DeltaSQLite
import Foundation
import Observation

/// A query's current result, kept current: an `@Observable` object for SwiftUI views (read
/// `elements` in `body`) and UIKit alike (`withObservationTracking`, or iterate `Replica.observe`).
///
/// It starts reading at once and updates on the main actor each time the result changes (see
/// `Replica.observe`); it stops when it is released.
///
/// ```swift
/// @State var open = LiveQuery(replica, RecordQuery("tasks", filter: .compare(member: "done", .eq, false)))
/// // or typed: LiveQuery(replica.collection(Task.self, named: "tasks"), filter: …)
/// ```
@available(iOS 17, macOS 14, tvOS 17, watchOS 10, visionOS 1, *)
@MainActor @Observable
public final class LiveQuery<Element: Sendable> {
    /// The result as last read: empty until `isLoaded`.
    public private(set) var elements: [Element] = []
    /// Whether `elements` holds a result yet.
    public private(set) var isLoaded = false
    /// Records of the result that did not decode as `Element` and were left out (typed queries).
    public private(set) var skipped = 0
    /// Why the query stopped updating, if it did: the store could not be read.
    public private(set) var error: ReplicaError?

    @ObservationIgnored private let watcher = Locked<Task<Void, Never>?>(nil)

    /// Watches `results` (a result and its count of skipped records each time it changes).
    init(_ results: AsyncThrowingStream<TypedResult<Element>, any Error>) {
        let task = Task { [weak self] in
            do {
                for try await result in results {
                    guard let self else { return }
                    self.elements = result.items
                    self.skipped = result.skipped.count
                    self.isLoaded = true
                }
            } catch {
                self?.error = error as? ReplicaError ?? ReplicaError(.store, "a live query stopped", evidence: "\(error)")
            }
        }
        watcher.withLock { $0 = task }
    }

    /// Watches `query` on `replica`: its records, as they are stored.
    public convenience init(_ replica: Replica, _ query: RecordQuery) where Element == Record {
        self.init(replica.observe(query) { TypedResult(items: $0, skipped: [], next: nil) })
    }

    deinit { watcher.withLock { $0?.cancel() } }
}

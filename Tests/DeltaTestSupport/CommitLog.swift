/// A store's history as acknowledged to writers: position -> the records that commit changed.
public actor CommitLog {
    /// Every acknowledged commit.
    public private(set) var commits: [UInt64: [(id: String, hidden: Bool, body: String)]] = [:]

    /// An empty log.
    public init() {}

    /// Logs what the commit at `position` changed.
    public func record(position: UInt64, changes: [(id: String, hidden: Bool, body: String)]) {
        commits[position] = changes
    }

    /// Visible records after every commit up to `position`.
    public func state(at position: UInt64) -> [String: String] {
        var state: [String: (Bool, String)] = [:]
        for key in commits.keys.sorted() where key <= position {
            for change in commits[key]! { state[change.id] = (change.hidden, change.body) }
        }
        return state.compactMapValues { $0.0 ? nil : $0.1 }
    }

    /// Ids whose last real change lies in (base, head]: exactly what a delta from base to head must carry.
    /// A write that repeats a record's current content and hidden state is no change, and takes no position.
    public func changed(after base: UInt64, through head: UInt64) -> Set<String> {
        var current: [String: (Bool, String)] = [:]
        var last: [String: UInt64] = [:]
        for key in commits.keys.sorted() where key <= head {
            for change in commits[key]! where current[change.id].map({ $0 != (change.hidden, change.body) }) ?? true {
                current[change.id] = (change.hidden, change.body)
                last[change.id] = key
            }
        }
        return Set(last.filter { $0.value > base }.map(\.key))
    }

    /// Waits until every commit up to `position` has been logged by the writer that made it.
    public func waitForCommits(through position: UInt64) async throws {
        var waited = 0
        while (1...max(1, position)).contains(where: { commits[$0] == nil }) && position > 0 {
            guard waited < 2_000 else { throw TestFailure("commit log never reached position \(position)") }
            try await Task.sleep(for: .milliseconds(5))
            waited += 1
        }
    }
}

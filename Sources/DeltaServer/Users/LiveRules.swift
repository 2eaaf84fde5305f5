import DeltaCore
import DeltaRules
public import DeltaStore
public import Logging
import NIOConcurrencyHelpers

/// The rules a server answers users under, following the ones its database holds: the database
/// is the one source of truth (`deltasnap rules install`, or another instance started with
/// `--rules`), and every instance on it follows its newest version within a second, without a
/// restart (docs/OPERATIONS.md, "Users": "Changing the rules without an outage").
///
/// Each request is decided under one version: the one held here when it starts
/// (`ServerConfiguration.pinned`). `runServer` asks the database for its version twice a second
/// (`follow`: one cheap read; the rules themselves only when it changed); a request whose read
/// or write transaction finds the database under another version than its own asks at once
/// (`refresh`) and is decided again, whole, under the newer one.
public final class LiveRules: Sendable {
    /// How often `follow` asks the database for its version.
    public static let interval: Duration = .milliseconds(500)

    /// The rules held, and how many times they were replaced (so that a refresh that read the
    /// database before another one adopted newer rules does not put older ones back).
    private struct State {
        var rules: StoredRules
        var generation: UInt64 = 0
    }

    private let state: NIOLockedValueBox<State>
    /// Run after each change, outside the lock (`whenChanged`).
    private let observers = NIOLockedValueBox<[@Sendable (StoredRules) -> Void]>([])

    /// Starts from `rules`, the version the database held at start (`StoreAdministration.installRules`, or
    /// `ChangeReader.currentRules`).
    public init(_ rules: StoredRules) {
        state = NIOLockedValueBox(State(rules: rules))
    }

    /// The rules held now.
    public var current: StoredRules { state.withLockedValue { $0.rules } }

    /// The version held now: what the early `304`s of users compare their tokens with, without
    /// copying the rules.
    var version: UInt64 { state.withLockedValue { $0.rules.version } }

    /// Whether the rules held now make `collection` public (the early `304`s of anyone).
    func isPublic(_ collection: CollectionName) -> Bool { state.withLockedValue { $0.rules.rules.isPublic(collection) } }

    /// Runs `action` with the new rules each time they change (after the change: a request that
    /// starts then is already decided under them).
    func whenChanged(_ action: @escaping @Sendable (StoredRules) -> Void) {
        observers.withLockedValue { $0.append(action) }
    }

    /// Reads the database's version now; when it differs from the one held, reads its rules and
    /// holds them (the store's reads then use the key indexes they need, `ChangeReader.followRules`).
    /// Returns the rules held afterwards. Several refreshes at once are safe: one that read the
    /// database before another adopted newer rules leaves those in place.
    @discardableResult
    public func refresh(from store: any ChangeReader) async throws -> StoredRules {
        let (held, generation) = state.withLockedValue { ($0.rules, $0.generation) }
        guard try await store.currentRulesVersion() != held.version, let found = try await store.currentRules(), found.version != held.version else {
            return current
        }
        let adopted = state.withLockedValue { locked -> Bool in
            guard locked.generation == generation else { return false }
            locked.rules = found
            locked.generation += 1
            return true
        }
        guard adopted else { return current }
        // Only the key indexes that `$rows` sources are read through; without them the reads are
        // right, only slower, so a failure here does not undo the change.
        try? await store.followRules(found.rules)
        for action in observers.withLockedValue({ $0 }) { action(found) }
        return found
    }

    /// Follows the database's rules until the task is cancelled: asks for its version every
    /// `interval`, and logs each change. A failed question is logged and asked again at the next
    /// turn; the rules held stay as they were meanwhile.
    public func follow(_ store: any ChangeReader, every interval: Duration = LiveRules.interval, logger: Logger = Logger(label: "deltasnap")) async {
        while !Task.isCancelled {
            do {
                try await Task.sleep(for: interval)
            } catch {
                return
            }
            let before = version
            do {
                let now = try await refresh(from: store)
                if now.version != before {
                    logger.notice("rules: now version \(now.version), as the database holds (was \(before))")
                }
            } catch is CancellationError {
                return
            } catch {
                logger.warning("rules: cannot read the database's version", metadata: ["error": "\(error)"])
            }
        }
    }
}

import DeltaStore
import NIOConcurrencyHelpers

/// Verdict facts for many reads in one statement (`PostgresStore.read`'s first look, which answers
/// `304`s and rejections). A read joins the next statement to start, never one already running, so
/// each read's facts come from a snapshot taken after it arrived: exactly what its own statement
/// would have seen. Under load one round trip answers every read that waited for it, instead of
/// one connection and one round trip per read.
final class VerdictBatch: Sendable {
    /// One question: a collection, and the position a token names.
    struct Key: Hashable, Sendable {
        let collection: String
        let position: UInt64
    }

    /// Runs one statement for a set of questions.
    typealias Run = @Sendable ([Key]) async throws -> [Key: ReadVerdict.Facts]

    /// Called once with a question's facts or the statement's error.
    typealias Reply = @Sendable (Result<ReadVerdict.Facts, any Error>) -> Void

    private struct State {
        var waiting: [Key: [Reply]] = [:]
        var running = false
    }

    /// The most distinct questions one statement asks; the rest wait for the next.
    let maximumKeys: Int
    private let state = NIOLockedValueBox(State())

    init(maximumKeys: Int = 1_000) { self.maximumKeys = maximumKeys }

    /// The facts for `key`, from a statement that starts after this call.
    func facts(_ key: Key, run: @escaping Run) async throws -> ReadVerdict.Facts {
        try await withCheckedThrowingContinuation { continuation in
            facts(key, run: run) { continuation.resume(with: $0) }
        }
    }

    /// The facts for `key`, from a statement that starts after this call, passed to `reply` (on
    /// the task that runs the statements: keep it short). No task per question.
    func facts(_ key: Key, run: @escaping Run, reply: @escaping Reply) {
        let start = state.withLockedValue { state -> Bool in
            state.waiting[key, default: []].append(reply)
            if state.running { return false }
            state.running = true
            return true
        }
        if start { Task { await self.drain(run) } }
    }

    /// Runs statements until nobody waits: each takes every question waiting when it starts.
    private func drain(_ run: Run) async {
        while true {
            let taken = state.withLockedValue { state -> [Key: [Reply]] in
                guard !state.waiting.isEmpty else {
                    state.running = false
                    return [:]
                }
                if state.waiting.count <= maximumKeys {
                    defer { state.waiting = [:] }
                    return state.waiting
                }
                var taken: [Key: [Reply]] = [:]
                for key in state.waiting.keys.prefix(maximumKeys) { taken[key] = state.waiting.removeValue(forKey: key) }
                return taken
            }
            if taken.isEmpty { return }
            do {
                let answers = try await run(Array(taken.keys))
                for (key, replies) in taken {
                    let result: Result<ReadVerdict.Facts, any Error> =
                        answers[key].map { .success($0) }
                        ?? .failure(StoreError(.corrupt, "verdict batch", "a question got no answer", evidence: key.collection))
                    for reply in replies { reply(result) }
                }
            } catch {
                for reply in taken.values.joined() { reply(.failure(error)) }
            }
        }
    }
}

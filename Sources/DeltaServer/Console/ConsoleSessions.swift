import DeltaCore
import Foundation
import NIOConcurrencyHelpers

/// The console's signed-in sessions, in this server's memory (docs/SECURITY.md, "The console").
///
/// A session is made when the owner's secret is given to the sign-in form; its cookie carries 32
/// random bytes, of which the server keeps only the SHA-256, so neither a memory dump nor a timing
/// difference of the lookup gives a usable cookie. Each session has its own CSRF token, which every
/// state-changing request must carry. A session ends at sign-out, after `idleLimit` without a
/// request, or `lifetime` after sign-in, whichever comes first; at most `capacity` live at once,
/// the least recently used going first. A session is this server's: behind a load balancer,
/// open the console on one instance (or keep a browser on one, by a sticky session).
final class ConsoleSessions: Sendable {
    /// The cookie's name.
    static let cookieName = "deltasnap-console"
    /// A session's longest life, and its longest idle time.
    static let lifetime: Duration = .seconds(8 * 3600), idleLimit: Duration = .seconds(3600)
    /// How many sessions live at once at most.
    static let capacity = 256

    /// One session, as the console's handlers see it.
    struct Session: Sendable, Equatable {
        /// The token every state-changing request of this session carries (`X-CSRF-Token`, or
        /// the form field `csrf`).
        let csrf: String
        /// When it was made, and when it was last used.
        let created: ContinuousClock.Instant
        var used: ContinuousClock.Instant
    }

    private let sessions = NIOLockedValueBox<[String: Session]>([:])
    private let clock: @Sendable () -> ContinuousClock.Instant

    init(clock: @escaping @Sendable () -> ContinuousClock.Instant = { ContinuousClock.now }) {
        self.clock = clock
    }

    /// Makes a session: the cookie's value, and the session.
    func start() -> (cookie: String, session: Session) {
        let cookie = Self.randomToken()
        let now = clock()
        let session = Session(csrf: Self.randomToken(), created: now, used: now)
        sessions.withLockedValue { sessions in
            sessions = sessions.filter { Self.live($0.value, at: now) }
            while sessions.count >= Self.capacity, let oldest = sessions.min(by: { $0.value.used < $1.value.used }) {
                sessions[oldest.key] = nil
            }
            sessions[Self.key(cookie)] = session
        }
        return (cookie, session)
    }

    /// The live session a cookie's value names, marked used now; nil for none (unknown, ended or expired).
    func session(_ cookie: String) -> Session? {
        let key = Self.key(cookie)
        let now = clock()
        return sessions.withLockedValue { sessions in
            guard var session = sessions[key] else { return nil }
            guard Self.live(session, at: now) else {
                sessions[key] = nil
                return nil
            }
            session.used = now
            sessions[key] = session
            return session
        }
    }

    /// Ends the session a cookie's value names (sign-out).
    func end(_ cookie: String) {
        let key = Self.key(cookie)
        _ = sessions.withLockedValue { $0.removeValue(forKey: key) }
    }

    /// Whether `csrf` is `session`'s token, compared in constant time.
    static func checks(_ csrf: String?, _ session: Session) -> Bool {
        guard let csrf else { return false }
        return constantTimeEqual(Array(csrf.utf8), Array(session.csrf.utf8))
    }

    private static func live(_ session: Session, at now: ContinuousClock.Instant) -> Bool {
        now - session.created < lifetime && now - session.used < idleLimit
    }

    /// The key a cookie's value is kept under: its SHA-256, in hex.
    private static func key(_ cookie: String) -> String {
        var hasher = SHA256()
        hasher.update(Array(cookie.utf8))
        return hasher.hexDigest()
    }

    /// 32 random bytes from the system's generator, in base64url without padding.
    static func randomToken() -> String {
        var generator = SystemRandomNumberGenerator()
        let bytes = (0..<32).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
        return Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }
}

/// How the console's sign-in slows repeated failures: after `freeFailures` wrong secrets in a
/// row, each attempt must wait 1, 2, 4… seconds (at most `longestWait`) after the last failure,
/// and one made sooner is refused `429` without the secret being compared. It counts failures of
/// every client together (the server's requests do not carry their peer's address to the
/// router), so guessing is as slow for a thousand addresses as for one; the price is that the
/// owner may wait as long as an attacker made the server wait. A right secret resets it.
final class SignInThrottle: Sendable {
    /// Failures allowed before the waits start, and the longest wait.
    static let freeFailures = 5, longestWait: Duration = .seconds(60)

    private struct State {
        var failures = 0
        var lastFailure: ContinuousClock.Instant?
    }

    private let state = NIOLockedValueBox(State())
    private let clock: @Sendable () -> ContinuousClock.Instant

    init(clock: @escaping @Sendable () -> ContinuousClock.Instant = { ContinuousClock.now }) {
        self.clock = clock
    }

    /// How long an attempt now must still wait (nil: it may go ahead).
    func wait() -> Duration? {
        let now = clock()
        return state.withLockedValue { state in
            guard state.failures >= Self.freeFailures, let last = state.lastFailure else { return nil }
            let doubling = min(state.failures - Self.freeFailures, 6)
            let delay = min(Duration.seconds(1 << doubling), Self.longestWait)
            let remaining = delay - (now - last)
            return remaining > .zero ? remaining : nil
        }
    }

    /// Notes an attempt's outcome.
    func record(success: Bool) {
        let now = clock()
        state.withLockedValue { state in
            if success {
                state = State()
            } else {
                state.failures += 1
                state.lastFailure = now
            }
        }
    }
}

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

/// How the console's sign-in slows repeated failures, per peer address (`PeerAddress`): after
/// `freeFailures` wrong secrets in a row from one address, each attempt from it must wait 1, 2,
/// 4… seconds (at most `longestWait`) after its last failure; one made sooner is refused `429`
/// without the secret being compared. An address has one attempt in flight at most: attempts
/// sent together wait for the one being compared (`429`), so that sending many at once, or
/// holding their bodies back, compares no more of them. A right secret resets its address.
/// Behind a proxy every client has the proxy's address: one client's failures then slow all.
/// An IPv6 address counts by its /64 network (`key(of:)`): one host usually holds a whole /64,
/// and would otherwise have 2^64 addresses to try from.
/// At most `capacity` addresses are remembered (those longest quiet go first).
final class SignInThrottle: Sendable {
    /// Failures allowed before the waits start, the longest wait, and the addresses remembered.
    static let freeFailures = 5, longestWait: Duration = .seconds(60), capacity = 10_000

    private struct Address {
        var failures = 0
        var lastFailure: ContinuousClock.Instant?
        var comparing = false
        /// When the last refusal of this address was logged (one line per wait, not per refusal).
        var loggedRefusal: ContinuousClock.Instant?
    }

    /// Whether an attempt may compare its secret now.
    enum Decision: Equatable {
        /// Yes: call `end` with its outcome.
        case compare
        /// No: another attempt of this address is being compared, or its wait lasts this much
        /// longer; `log` says whether this is the first refusal of the wait (the one to log).
        case wait(Duration, log: Bool)
    }

    private let addresses = NIOLockedValueBox<[String: Address]>([:])
    private let clock: @Sendable () -> ContinuousClock.Instant

    init(clock: @escaping @Sendable () -> ContinuousClock.Instant = { ContinuousClock.now }) {
        self.clock = clock
    }

    /// What an address counts as: an IPv6 address its /64 network (`2001:db8:1:2::/64`); an
    /// IPv4 address, or an IPv4 address mapped into IPv6, itself.
    static func key(of address: String) -> String {
        var bytes = in6_addr()
        guard address.contains(":"), inet_pton(AF_INET6, address, &bytes) == 1 else { return address }
        let octets = withUnsafeBytes(of: bytes) { Array($0) }
        if octets[0..<10].allSatisfy({ $0 == 0 }), octets[10] == 0xff, octets[11] == 0xff {
            return octets[12...].map(String.init).joined(separator: ".")
        }
        let groups = stride(from: 0, to: 8, by: 2).map { String(UInt16(octets[$0]) << 8 | UInt16(octets[$0 + 1]), radix: 16) }
        return groups.joined(separator: ":") + "::/64"
    }

    /// Decides, and on `compare` marks the address's attempt in flight, in one step.
    func begin(_ address: String) -> Decision {
        let address = Self.key(of: address)
        let now = clock()
        return addresses.withLockedValue { addresses in
            var state = addresses[address] ?? Address()
            defer { addresses[address] = state }
            if state.comparing { return .wait(.seconds(1), log: false) }
            if state.failures >= Self.freeFailures, let last = state.lastFailure {
                let delay = min(Duration.seconds(1 << min(state.failures - Self.freeFailures, 6)), Self.longestWait)
                let remaining = delay - (now - last)
                if remaining > .zero {
                    let log = state.loggedRefusal.map { $0 < last } ?? true
                    if log { state.loggedRefusal = now }
                    return .wait(remaining, log: log)
                }
            }
            state.comparing = true
            if addresses.count >= Self.capacity, addresses[address] == nil,
                let quiet = addresses.filter({ !$0.value.comparing }).min(by: { ($0.value.lastFailure ?? now) < ($1.value.lastFailure ?? now) })
            {
                addresses[quiet.key] = nil
            }
            return .compare
        }
    }

    /// Notes the outcome of the attempt `begin` let compare.
    func end(_ address: String, success: Bool) {
        let address = Self.key(of: address)
        let now = clock()
        addresses.withLockedValue { addresses in
            guard !success else {
                addresses[address] = nil
                return
            }
            var state = addresses[address] ?? Address()
            state.comparing = false
            state.failures += 1
            state.lastFailure = now
            addresses[address] = state
        }
    }
}

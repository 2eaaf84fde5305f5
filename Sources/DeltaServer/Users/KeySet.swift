import DeltaCore
import Foundation
import HTTPTypes
import JWTKit
import Logging
import NIOConcurrencyHelpers
import Prometheus

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The public keys of a JSON Web Key Set (RFC 7517), from a file or a URL (`--jwks`).
///
/// A file is looked at again, at most once a second, when a token is verified or a kept
/// verification is used, and read again when its bytes changed: a key taken out of it stops
/// verifying within a second, kept verifications included (`Authenticator`). A URL is fetched at
/// start and again, at most once per `refetchInterval`, while tokens are used (in the background)
/// or at once when a token names a `kid` the set does not have. Every key needs a `kid`; keys for
/// encryption (`"use": "enc"`) are left out.
///
/// Each set that replaces the one in force with other keys is a new `generation`. A source that
/// cannot be read, or whose set does not parse (truncated JSON, a key without `kid`, no usable
/// key), changes nothing: the last good set stays in force, and the failure is logged at `error`
/// and counted in the metrics (`deltasnap_jwks_failures_total`, `deltasnap_jwks_failing`).
actor KeySet {
    /// Where the set comes from.
    let location: JWKSLocation
    /// The least time between two fetches of a URL.
    static let refetchInterval: TimeInterval = 30
    /// This set's least time between two fetches of its URL (`refetchInterval`; shorter in tests).
    let refetchAfter: TimeInterval
    /// The longest a file's set is used without looking at the file again.
    static let fileInterval: TimeInterval = 1
    /// The largest set read.
    static let maximumBytes = 1 << 20

    /// One key: its id, type (`RSA`, `EC`, `OKP`), curve, a collection holding it alone, and its
    /// JWK as canonical JSON (two sets with the same kids and JWKs are the same set).
    struct Key {
        let kid: String
        let type: String
        let curve: String?
        let keys: JWTKeyCollection
        /// The key's JWK as canonical JSON.
        let jwk: [UInt8]
    }

    /// The set in force, as read without waiting for the actor: its generation (one more at each
    /// set that changes the keys) and when its source was last looked at.
    struct Freshness: Sendable {
        /// 0 for the set read at start, one more at each set with other keys.
        var generation: UInt64
        /// When the last look at the source started (a URL) or read it (a file).
        var lookedAt: ContinuousClock.Instant
    }

    /// Where the set tells of reads that fail and of sets that replace it: the server's log and,
    /// once the application is built, its metrics.
    struct Reporting: Sendable {
        /// Where failures (at `error`) and replacements (at `info`) are logged.
        var logger: Logger
        /// Where they are counted (`ServerMetrics.jwksFailures` and the others), once known.
        var metrics: ServerMetrics?
    }

    /// The generation in force and the last look, for the checks that cannot wait (`isCurrent`).
    let freshness: NIOLockedValueBox<Freshness>
    /// Where failures and replacements are told (`Authenticator.report`).
    let reporting = NIOLockedValueBox(Reporting(logger: Logger(label: "deltasnap"), metrics: nil))
    /// How long the set in force is used without looking at its source again.
    private let staleAfter: Duration
    /// The keys in force, by `kid`.
    private(set) var keys: [String: Key] = [:]
    /// The bytes the source last gave and, when they do not make a set, why: the same bytes
    /// again are not parsed again.
    private var lastRead: (bytes: [UInt8], failure: String?)?
    /// The failure last logged and counted, until a look succeeds: told once, not at every look.
    private var lastFailure: String?
    /// The look at the source under way; callers that must see its outcome wait for it.
    private var looking: Task<Void, Never>?

    /// Reads (or fetches) the set; throws when it cannot be read or holds no usable key.
    init(_ location: JWKSLocation, refetchAfter: TimeInterval = KeySet.refetchInterval) async throws {
        self.location = location
        self.refetchAfter = refetchAfter
        switch location {
        case .file: staleAfter = .seconds(Self.fileInterval)
        case .url: staleAfter = .seconds(refetchAfter)
        }
        freshness = NIOLockedValueBox(Freshness(generation: 0, lookedAt: .now))
        let bytes = try await Self.fetch(location)
        keys = try await Self.parse(bytes, source: location.description)
        lastRead = (bytes, nil)
    }

    /// Whether a verification made with the set of `generation` holds now without looking at the
    /// source: that set is still in force, and the source is not due for a look.
    nonisolated func isCurrent(_ generation: UInt64, now: ContinuousClock.Instant = .now) -> Bool {
        freshness.withLockedValue { $0.generation == generation && $0.lookedAt.duration(to: now) < staleAfter }
    }

    /// The key `kid` names (or the only key when there is no `kid`), or nil, and the generation of
    /// the set it was looked up in. The source is looked at first when it is due; a `kid` the set
    /// lacks waits for a URL's fetch under way (at most one per `refetchAfter`, however many
    /// unknown `kid`s arrive).
    func key(_ kid: String?) async -> (key: Key?, generation: UInt64) {
        await refreshIfDue()
        if lookup(kid) == nil, let looking { await looking.value }
        return (lookup(kid), freshness.withLockedValue { $0.generation })
    }

    /// Looks at the source when it is due: a file is read, and the caller waits for it (a key
    /// taken out stops verifying within `fileInterval`); a URL is fetched in the background, and
    /// the caller goes on with the set in force.
    func refreshIfDue() async {
        let due = freshness.withLockedValue { $0.lookedAt.duration(to: .now) >= staleAfter }
        switch location {
        case .file:
            guard due || looking != nil else { return }
            if looking == nil { startLook() }
            await looking?.value
        case .url:
            if due && looking == nil { startLook() }
        }
    }

    /// The key `kid` names in the set in force (the only key when there is no `kid`).
    private func lookup(_ kid: String?) -> Key? {
        if let kid { return keys[kid] }
        return keys.count == 1 ? keys.values.first : nil
    }

    /// Starts a look at the source. A URL counts as looked at from the start of its fetch, so
    /// that a slow provider is asked once per `refetchAfter`; a file once its bytes are read.
    private func startLook() {
        let started = ContinuousClock.now
        if case .url = location { freshness.withLockedValue { $0.lookedAt = started } }
        looking = Task { await self.look(started: started) }
    }

    /// Reads the source; puts a set whose keys differ in force, or tells why it cannot.
    private func look(started: ContinuousClock.Instant) async {
        do {
            let bytes = try await Self.fetch(location)
            if bytes != lastRead?.bytes {
                do {
                    let parsed = try await Self.parse(bytes, source: location.description)
                    lastRead = (bytes, nil)
                    install(parsed)
                } catch {
                    lastRead = (bytes, Self.describe(error, location))
                }
            }
            if let failure = lastRead?.failure {
                failed(failure)
            } else {
                recovered()
            }
        } catch {
            failed(Self.describe(error, location))
        }
        freshness.withLockedValue { $0.lookedAt = max($0.lookedAt, started) }
        looking = nil
    }

    /// Puts `parsed` in force: a new generation when its keys differ from those in force, which
    /// ends every verification made with the old ones.
    private func install(_ parsed: [String: Key]) {
        let same = parsed.count == keys.count && parsed.allSatisfy { keys[$0.key]?.jwk == $0.value.jwk }
        keys = parsed
        guard !same else { return }
        freshness.withLockedValue { $0.generation += 1 }
        let reporting = reporting.withLockedValue { $0 }
        reporting.metrics?.jwksChanges.increment()
        reporting.logger.info(
            "--jwks: a new key set is in force; tokens verified with the one before are verified again",
            metadata: ["jwks": "\(location)", "kids": "\(keys.keys.sorted().joined(separator: ","))"])
    }

    /// A look that failed: the last good set stays in force; logged at `error` and counted the
    /// first time this failure is seen.
    private func failed(_ failure: String) {
        let reporting = reporting.withLockedValue { $0 }
        reporting.metrics?.jwksFailing.set(Int64(1))
        guard failure != lastFailure else { return }
        lastFailure = failure
        reporting.metrics?.jwksFailures.increment()
        reporting.logger.error("--jwks: the key set cannot be used; the last good set stays in force", metadata: ["error": "\(failure)"])
    }

    /// A look that succeeded after failures.
    private func recovered() {
        guard lastFailure != nil else { return }
        lastFailure = nil
        let reporting = reporting.withLockedValue { $0 }
        reporting.metrics?.jwksFailing.set(Int64(0))
        reporting.logger.info("--jwks: the key set can be used again", metadata: ["jwks": "\(location)"])
    }

    /// A failure as it is logged: the problem's `detail`, or the error's description.
    private static func describe(_ error: any Error, _ location: JWKSLocation) -> String {
        (error as? Problem)?.detail ?? "--jwks \(location): cannot be read (\(String(describing: error).prefix(200)))"
    }

    /// The bytes of the source: the file's, or the URL's `200` body.
    private static func fetch(_ location: JWKSLocation) async throws -> [UInt8] {
        switch location {
        case .file(let path):
            guard let data = FileManager.default.contents(atPath: path) else {
                throw keySetProblem("--jwks \(path)", "cannot be read")
            }
            return Array(data)
        case .url(let url):
            var request = URLRequest(url: url, cachePolicy: .reloadIgnoringLocalAndRemoteCacheData, timeoutInterval: 10)
            request.setValue("application/json", forHTTPHeaderField: "Accept")
            let (data, response) = try await URLSession.shared.data(for: request)
            guard let http = response as? HTTPURLResponse, http.statusCode == 200 else {
                throw keySetProblem("--jwks \(url)", "did not answer 200", evidence: "\((response as? HTTPURLResponse)?.statusCode ?? 0)")
            }
            return Array(data)
        }
    }

    /// The usable keys of a JWK Set document.
    static func parse(_ bytes: [UInt8], source: String) async throws -> [String: Key] {
        guard bytes.count <= maximumBytes else { throw keySetProblem("--jwks \(source)", "larger than \(maximumBytes) bytes", evidence: "\(bytes.count)") }
        guard case .object? = try? JSONValue(parsing: bytes), case .array(let items)? = try JSONValue(parsing: bytes)["keys"] else {
            throw keySetProblem("--jwks \(source)", "not a JWK Set ({\"keys\": [...]})")
        }
        var keys: [String: Key] = [:]
        for (index, item) in items.enumerated() {
            guard case .string(let type)? = item["kty"], case .string(let kid)? = item["kid"], !kid.isEmpty else {
                throw keySetProblem("--jwks \(source)", "every key needs \"kty\" and a \"kid\"", evidence: "key \(index)")
            }
            if case .string("enc")? = item["use"] { continue }
            var curve: String?
            if case .string(let name)? = item["crv"] { curve = name }
            guard ["RSA", "EC", "OKP"].contains(type) else { continue }
            let collection = JWTKeyCollection()
            do {
                let jwk = try JSONDecoder().decode(JWK.self, from: Data(item.canonicalBytes))
                try await collection.add(jwk: jwk, isDefault: true)
            } catch {
                throw keySetProblem("--jwks \(source)", "key \(String(reflecting: kid)) is not a usable public key", evidence: "\(error)")
            }
            keys[kid] = Key(kid: kid, type: type, curve: curve, keys: collection, jwk: item.canonicalBytes)
        }
        guard !keys.isEmpty else { throw keySetProblem("--jwks \(source)", "holds no RSA, EC or OKP signing key") }
        return keys
    }
}

/// Where a JWK Set comes from (`--jwks FILE|URL`).
public enum JWKSLocation: Sendable, CustomStringConvertible {
    /// A file, read again when it changes.
    case file(String)
    /// An `http(s)` URL, fetched at start, then at most every 30 s while tokens are used.
    case url(URL)

    /// A path, or a URL when the text starts with `http://` or `https://`.
    public init(_ text: String) {
        if text.hasPrefix("http://") || text.hasPrefix("https://"), let url = URL(string: text) { self = .url(url) } else { self = .file(text) }
    }

    /// The path or URL.
    public var description: String {
        switch self {
        case .file(let path): path
        case .url(let url): url.absoluteString
        }
    }
}

/// The problem a JWK Set that cannot be used is: without its keys no user token can be checked.
private func keySetProblem(_ what: String, _ why: String, evidence: String? = nil) -> Problem {
    Problem(.serviceUnavailable, "jwks-unavailable", "\(what): \(why)" + (evidence.map { " (\($0))" } ?? ""))
}

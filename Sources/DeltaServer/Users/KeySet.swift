import DeltaCore
import Foundation
import HTTPTypes
import JWTKit
import NIOConcurrencyHelpers

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The public keys of a JSON Web Key Set (RFC 7517), from a file or a URL (`--jwks`).
///
/// A file is read again when its size or modification time changes (looked at, at most once a
/// second, when a token needs a key). A URL is fetched at start and again, at most once per
/// `refetchInterval`, when a token names a `kid` the set does not have: keys rotate without a
/// restart. Every key needs a `kid`; keys for encryption (`"use": "enc"`) are left out.
actor KeySet {
    /// Where the set comes from.
    let location: JWKSLocation
    /// The least time between two fetches of a URL.
    static let refetchInterval: TimeInterval = 30
    /// This set's least time between two fetches of its URL (`refetchInterval`; shorter in tests).
    let refetchAfter: TimeInterval
    /// The largest set read.
    static let maximumBytes = 1 << 20

    /// One key: its id, type (`RSA`, `EC`, `OKP`), curve, and a collection holding it alone.
    struct Key {
        let kid: String
        let type: String
        let curve: String?
        let keys: JWTKeyCollection
    }

    private(set) var keys: [String: Key] = [:]
    private var lastLook = Date.distantPast
    private var fileStamp: (Date, Int)?

    /// Reads (or fetches) the set; throws when it cannot be read or holds no usable key.
    init(_ location: JWKSLocation, refetchAfter: TimeInterval = KeySet.refetchInterval) async throws {
        self.location = location
        self.refetchAfter = refetchAfter
        try await load()
    }

    /// The key `kid` names (or the only key when there is no `kid`), looking at the source again
    /// when it is unknown and the source may have changed; nil when there is none.
    func key(_ kid: String?) async -> Key? {
        if lookup(kid) != nil {
            // A file that changed is read again first: a key taken out of it stops verifying at once.
            if case .file = location { await refreshFileIfChanged() }
            return lookup(kid)
        }
        let wait: TimeInterval
        switch location {
        case .file: wait = 1
        case .url: wait = refetchAfter
        }
        if Date().timeIntervalSince(lastLook) >= wait { try? await load() }
        return lookup(kid)
    }

    private func lookup(_ kid: String?) -> Key? {
        if let kid { return keys[kid] }
        return keys.count == 1 ? keys.values.first : nil
    }

    private func refreshFileIfChanged() async {
        guard Date().timeIntervalSince(lastLook) >= 1, case .file(let path) = location else { return }
        lastLook = Date()
        if let stamp = Self.stamp(path), let known = fileStamp, stamp == known { return }
        try? await load()
    }

    private static func stamp(_ path: String) -> (Date, Int)? {
        guard let attributes = try? FileManager.default.attributesOfItem(atPath: path),
            let date = attributes[.modificationDate] as? Date, let size = attributes[.size] as? Int
        else { return nil }
        return (date, size)
    }

    /// Reads the set from its source and replaces the keys held.
    private func load() async throws {
        lastLook = Date()
        let bytes: [UInt8]
        switch location {
        case .file(let path):
            fileStamp = Self.stamp(path)
            guard let data = FileManager.default.contents(atPath: path) else {
                throw keySetProblem("--jwks \(path)", "cannot be read")
            }
            bytes = Array(data)
        case .url(let url):
            var request = URLRequest(url: url, cachePolicy: .reloadIgnoringLocalAndRemoteCacheData, timeoutInterval: 10)
            request.setValue("application/json", forHTTPHeaderField: "Accept")
            let (data, response) = try await URLSession.shared.data(for: request)
            guard let http = response as? HTTPURLResponse, http.statusCode == 200 else {
                throw keySetProblem("--jwks \(url)", "did not answer 200", evidence: "\((response as? HTTPURLResponse)?.statusCode ?? 0)")
            }
            bytes = Array(data)
        }
        keys = try await Self.parse(bytes, source: location.description)
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
            keys[kid] = Key(kid: kid, type: type, curve: curve, keys: collection)
        }
        guard !keys.isEmpty else { throw keySetProblem("--jwks \(source)", "holds no RSA, EC or OKP signing key") }
        return keys
    }
}

/// Where a JWK Set comes from (`--jwks FILE|URL`).
public enum JWKSLocation: Sendable, CustomStringConvertible {
    /// A file, read again when it changes.
    case file(String)
    /// An `http(s)` URL, fetched at start and when a token names an unknown key.
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

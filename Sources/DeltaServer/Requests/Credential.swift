import DeltaCore
import HTTPTypes
import Hummingbird

/// Who is writing, decided from `Authorization: Bearer …` in one place, so that other
/// credentials (signed per-user tokens, say) can be added here later.
///
/// The owner's secret (`--write-token`) may write anything, unconditionally. The client key
/// (`--client-key`) is what apps ship: it may push (`POST /push`) and make conditional writes
/// (`If-Match`), only to the collections named by `--client-writable`.
enum Credential: Sendable, Equatable {
    /// The data owner: any write, with or without a precondition.
    case owner
    /// An app: pushes and conditional writes to the writable collections only.
    case client

    /// The credential a request presents; `401` when it presents none that this server accepts,
    /// `403` when the server takes no writes at all. Secrets are compared in constant time.
    static func of(_ request: Request, _ configuration: ServerConfiguration) throws -> Credential {
        guard configuration.writeToken != nil || configuration.clientKey != nil else {
            throw Problem(.forbidden, "read-only", "writes: this server is read-only (start it with --write-token, or --client-key for apps)")
        }
        let challenge: HTTPFields = [.wwwAuthenticate: "Bearer realm=\"deltasnap\""]
        guard let header = request.headers[.authorization] else {
            throw Problem(.unauthorized, "unauthorized", "writes: an Authorization: Bearer <secret> header is required", headers: challenge)
        }
        let parts = header.split(separator: " ", maxSplits: 1)
        guard parts.count == 2, parts[0].lowercased() == "bearer" else {
            throw Problem(.unauthorized, "unauthorized", "writes: the Authorization header must be Bearer <secret>", headers: challenge)
        }
        let presented = Array(parts[1].utf8)
        // Both comparisons always run, so the time taken says nothing about which one matched.
        let owner = configuration.writeToken.map { constantTimeEqual(presented, Array($0.utf8)) } ?? false
        let client = configuration.clientKey.map { constantTimeEqual(presented, Array($0.utf8)) } ?? false
        if owner { return .owner }
        if client { return .client }
        throw Problem(.unauthorized, "unauthorized", "writes: the bearer secret is wrong", headers: challenge)
    }

    /// `403` unless this credential may write `collection`.
    func mayWrite(_ collection: CollectionName, _ configuration: ServerConfiguration) throws {
        guard self == .client, !configuration.clientWritable.contains(collection.rawValue) else { return }
        throw Problem(
            .forbidden, "not-writable",
            "collection \(collection): apps may not write it (the server's --client-writable is \(configuration.clientWritable.sorted().joined(separator: ",")))"
        )
    }

    /// `403` unless this is the owner: unconditional and batch writes are the owner's alone.
    func mustBeOwner(_ what: String) throws {
        guard self == .owner else {
            throw Problem(.forbidden, "owner-only", "\(what): only the owner's write secret may do this; apps push (POST /push) or write with If-Match")
        }
    }
}

import DeltaCore
import DeltaRules
import DeltaStore
import HTTPTypes
import Hummingbird

/// Who a request acts for, decided from `Authorization: Bearer …` in one place (`Authentication`).
///
/// The owner's secret (`--write-token`) reads and writes anything, rules or not. The client key
/// (`--client-key`) is what apps ship: it reads public collections, pushes (`POST /push`) and
/// makes conditional writes (`If-Match`), only to the collections named by `--client-writable`.
/// A user presents a JSON Web Token (`Authenticator`): what they may read and write is what the
/// rules (`--rules`) give them.
enum Credential: Sendable, Equatable {
    /// The data owner: any write, with or without a precondition.
    case owner
    /// An app: pushes and conditional writes to the writable collections only.
    case client
    /// A signed-in user, with the claims of their verified token.
    case user(Claims)

    /// `403` unless this credential may write `collection`.
    /// The decision is the store's `Principal.mayWrite`, the one a push's mutations get.
    func mayWrite(_ collection: CollectionName, _ configuration: ServerConfiguration) throws {
        if case .user = self {
            guard configuration.rules != nil, try principal(configuration).mayWrite(collection) else {
                throw Problem(.forbidden, "not-writable", "collection \(collection): the rules give users no writes to it")
            }
            return
        }
        guard try !principal(configuration).mayWrite(collection) else { return }
        throw Problem(
            .forbidden, "not-writable",
            "collection \(collection): apps may not write it (the server's --client-writable is \(configuration.clientWritable.sorted().joined(separator: ",")))"
        )
    }

    /// Who this credential writes as (`Principal`): what its answers may show, and whom a push
    /// client id it claims belongs to. `403 not-writable` for a user on a server without rules,
    /// which gives users no writes (`mayWrite` says so first).
    func principal(_ configuration: ServerConfiguration) throws -> Principal {
        switch self {
        case .owner: return .owner
        case .client: return .clientKey(rules: configuration.rules?.rules, writable: configuration.clientWritable)
        case .user(let claims):
            guard let stored = configuration.rules else {
                throw Problem(.forbidden, "not-writable", "writes: the server has no rules, which give users no writes")
            }
            return .user(UserWrite(claims: claims, rules: stored.rules, rulesVersion: stored.version))
        }
    }

    /// The push ledger's name for this credential (`Principal.ledgerName`).
    var ledgerName: String {
        switch self {
        case .owner: return Principal.ownerName
        case .client: return Principal.clientKeyName
        case .user(let claims): return Principal.userName(claims.subject)
        }
    }

    /// `403` unless this is the owner: unconditional and batch writes are the owner's alone.
    func mustBeOwner(_ what: String) throws {
        guard self == .owner else {
            throw Problem(.forbidden, "owner-only", "\(what): only the owner's write secret may do this; apps push (POST /push) or write with If-Match")
        }
    }
}

extension Problem {
    /// `403 not-readable`: the client key reads public collections only, a whole collection or one
    /// record alike.
    static func clientMayNotRead(_ collection: CollectionName) -> Problem {
        Problem(.forbidden, "not-readable", "collection \(collection): the client key reads public collections only; sign in with a user's token")
    }
}

/// What a route needs of who asks (docs/SECURITY.md, "Principals and what each credential can
/// do"). Every route declares one (`Route.access`, a switch the compiler holds complete), and
/// one place enforces it (`RouteHandler.gated`): a route's handler is given the identity its
/// access yields and has no other way to learn who asks.
enum RouteAccess: String, Sendable, CaseIterable {
    /// Anyone; a credential is not read at all: health, metrics, this API's description, baked
    /// snapshots (public by construction).
    case anyone
    /// Anyone may ask; what is answered is what `ReadPolicy` gives the credential presented, which
    /// is authenticated once, when the answer first depends on it (a public collection's read
    /// never does).
    case reader
    /// A credential this server accepts: `401` without one or with a wrong one, `403 read-only`
    /// when the server takes no writes at all.
    case writer
    /// The owner's secret alone: `403 owner-only` for any other credential.
    case owner
}

extension Route {
    /// What the route needs of who asks.
    var access: RouteAccess {
        switch self {
        case .health, .metrics, .openAPI, .snapshot, .currentSnapshot: .anyone
        case .read, .readHead, .record, .blob, .blobHead: .reader
        case .put, .delete, .push, .blobPut, .blobKept: .writer
        case .batch, .bakes: .owner
        }
    }

    /// What an owner-only route does, for its `403 owner-only`.
    var ownerAction: String {
        switch self {
        case .batch: "batch writes"
        case .bakes: "recording bakes"
        default: "\(method) \(path)"
        }
    }
}

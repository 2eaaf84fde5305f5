/// The names of the protocol's own HTTP headers (docs/PROTOCOL.md), in one place for the server,
/// the client and the command line: no `"Delta-…"` literal stands anywhere else.
public enum DeltaHeader {
    /// `full` or `delta`: what a `200` carries.
    public static let mode = "Delta-Mode"
    /// On a delta: the validator it was computed from, the one the request sent.
    public static let base = "Delta-Base"
    /// On a `409`: why the token cannot be honoured (`TokenRejection`).
    public static let reset = "Delta-Reset"
    /// On every `200` and `304`: the state digest at the answer's token (`StateDigest`).
    public static let digest = "Delta-Digest"
    /// On a pull: the id of a client that pushes; on the answer, `lastMutation`.
    public static let client = "Delta-Client"
    /// On an answer to a pull that names its client: that client's last mutation the data holds.
    public static let lastMutation = "Delta-Last-Mutation"
    /// On a conditional read: the client follows a `307` to the cacheable read (`1`).
    public static let redirect = "Delta-Redirect"
}

/// Why a token cannot be honoured exactly, the value of `Delta-Reset` on a `409`: the client
/// must reset to its snapshot (docs/PROTOCOL.md, *Reset*).
public enum TokenRejection: String, Sendable, Equatable, CaseIterable {
    /// Not a token this protocol issues.
    case malformed
    /// Issued by a different database.
    case foreignDatabase = "foreign-database"
    /// Names a commit this database does not have at that position (its history was rolled back).
    case unknownCommit = "unknown-commit"
    /// Names a position after this database's newest commit.
    case ahead
    /// Names a position older than the history this database still holds.
    case expired
    /// Was issued to another selection (another `filter` or `limit`, or none) than the one asked for.
    case selectionChanged = "selection-changed"
    /// Was issued to another user (another `sub`, or other values of the claims the rules read),
    /// or to no user, than the one whose token this request carries.
    case userChanged = "user-changed"
    /// Was issued under other rules than the ones the server holds now (`deltasnap serve --rules`).
    case rulesChanged = "rules-changed"
}

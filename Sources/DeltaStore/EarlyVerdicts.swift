public import DeltaCore

/// What a store can say about a conditional read before the request is routed: the capability
/// behind the HTTP layer's early `304`s (DeltaServer/FastPath). A store that offers it is passed
/// to the server where the application is built; one that does not gets no early answers.
public protocol EarlyVerdicts: Sendable {
    /// The verdict on a read of `collection` since `since`, without waiting. Called on an event
    /// loop: it must not block beyond a short local query.
    func earlyVerdict(_ collection: CollectionName, since: Since) -> EarlyVerdict
}

/// An early verdict: `304`, "ask the ordinary way", or "ask me with one round trip".
public enum EarlyVerdict: Sendable {
    /// The current token and state digest when it is, or nil: the ordinary path answers.
    public typealias Reply = @Sendable ((token: Token, digest: StateDigest)?) -> Void

    /// `since` is current: the answer is `304` with this token and digest.
    case notModified(Token, StateDigest)
    /// Nothing can be said without waiting: the request takes the ordinary path.
    case unknown
    /// Call once: it replies, on any thread, from a statement that starts after the call (never
    /// a stale `304`), with the token when `since` is current and nil otherwise or on any error.
    case ask(@Sendable (_ reply: @escaping Reply) -> Void)
}

public import DeltaCore

/// What a read decides before it streams anything: an answer, or a feed to open. The same
/// rules for every backend; each backend only gathers the `Facts` inside its read transaction.
public enum ReadVerdict: Sendable {
    /// Answer without records: not modified, or the token is rejected.
    case answer(ReadResult)
    /// Stream records: the full dataset or a delta, described by this token, with the collection's state digest there.
    case stream(Token, FeedMode, StateDigest)

    /// What the read transaction saw.
    public struct Facts: Sendable {
        /// The newest committed position of the database (0 when empty).
        public var head: UInt64
        /// The oldest position the database still holds the history after (0: all of it).
        public var horizon: UInt64
        /// The collection's newest position; nil when the collection has no records.
        public var collectionHead: UInt64?
        /// The tag of the commit at `collectionHead`; nil when that commit is missing.
        public var collectionTag: UInt32?
        /// The tag of the commit at the position asked about; nil when there is none.
        public var askedTag: UInt32?
        /// The collection's state digest.
        public var digest: StateDigest
        /// How many visible records the collection has (what a full answer sends).
        public var visible: Int
        /// How many records changed after the position asked about (what a delta sends); nil when not asked.
        public var changed: Int?

        /// Creates the facts.
        public init(
            head: UInt64, horizon: UInt64, collectionHead: UInt64?, collectionTag: UInt32?, askedTag: UInt32?, digest: StateDigest,
            visible: Int = 0, changed: Int? = nil
        ) {
            self.head = head
            self.horizon = horizon
            self.collectionHead = collectionHead
            self.collectionTag = collectionTag
            self.askedTag = askedTag
            self.digest = digest
            self.visible = visible
            self.changed = changed
        }
    }

    /// The position `since` asks about (0 for the full dataset).
    public static func askedPosition(_ since: Since) -> UInt64 {
        switch since {
        case .nothing: 0
        case .token(let token): token.position
        case .position(let position): position
        }
    }

    /// Decides the answer to a read of `collection` since `since`, from `facts`. `store` names the
    /// database in errors.
    ///
    /// A delta that would carry more records than the collection has visible ones (many hides and
    /// edits since an old token) is answered with the full dataset instead: fewer records to send
    /// and to apply. A client replaces its copy with a full answer (docs/PROTOCOL.md). Selections
    /// ask without `changed`, and are never switched.
    ///
    /// A collection without a single record is `notFound`, unless `absentIsEmpty`: then it is read
    /// as empty since position 0 (whose tag is 0). A user's read of a collection the rules name
    /// asks so: the collection exists because the rules say so, before anyone writes to it.
    public static func decide(
        _ collection: CollectionName, since: Since, database: UInt64, facts: Facts, store: String, absentIsEmpty: Bool = false
    ) throws -> ReadVerdict {
        let absent = facts.collectionHead == nil
        guard let collectionHead = facts.collectionHead ?? (absentIsEmpty ? 0 : nil) else {
            throw StoreError(.notFound, "collection \(collection)", "has no records")
        }
        guard collectionHead <= Token.maximumPosition, facts.head <= Token.maximumPosition else {
            throw StoreError(.corrupt, "store \(store)", "a position is past what a token can name", evidence: "position \(max(collectionHead, facts.head))")
        }
        guard let collectionTag = facts.collectionTag ?? (absent ? 0 : nil) else {
            throw StoreError(.corrupt, "store \(store)", "a record names a commit that does not exist", evidence: "position \(collectionHead)")
        }
        let current = Token(database: database, position: collectionHead, commit: collectionTag)
        let asked = askedPosition(since)
        let askedTag: UInt32? = asked == 0 ? 0 : facts.askedTag
        switch since {
        case .nothing:
            return .stream(current, .full, facts.digest)
        case .token(let token):
            guard token.database == database else { return .answer(.rejected(.foreignDatabase)) }
            if asked > facts.head { return .answer(.rejected(.ahead)) }
            if asked < facts.horizon { return .answer(.rejected(.expired)) }
            guard askedTag == token.commit else { return .answer(.rejected(.unknownCommit)) }
        case .position:
            if asked > facts.head { return .answer(.rejected(.ahead)) }
            if asked < facts.horizon { return .answer(.rejected(.expired)) }
        }
        if collectionHead <= asked { return .answer(.notModified(current, facts.digest)) }
        if let changed = facts.changed, changed > facts.visible { return .stream(current, .full, facts.digest) }
        return .stream(current, .delta(since: asked), facts.digest)
    }
}

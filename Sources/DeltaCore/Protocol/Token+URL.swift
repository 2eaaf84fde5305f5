/// A token as a query parameter of a cacheable URL (`?since=…&until=…`, docs/PROTOCOL.md,
/// "Cacheable reads"): the entity tag's inner text, `1.<16 hex>.<decimal>.<8 hex>` (and a
/// selection's three more fields), which needs no percent-encoding.
extension Token {
    /// The token as a URL query value: the entity tag without `W/` and quotes.
    public var urlValue: String {
        let tag = entityTag
        return String(tag.dropFirst(3).dropLast())
    }

    /// Parses a URL query value; the exact inverse of `urlValue`.
    public init(urlValue text: some StringProtocol) throws {
        guard text.utf8.count <= 4096, !text.contains("\"") else {
            throw WireError(.token, "not a token this server issued", evidence: String(reflecting: String(text.prefix(100))))
        }
        try self.init(entityTag: "W/\"" + text + "\"")
    }

    /// This token without its selection mark: the collection's position and commit alone.
    public var unmarked: Token { marked(nil) }

    /// Whether both name the same commit of the same database (selection marks aside).
    public func sameCommit(as other: Token) -> Bool {
        database == other.database && position == other.position && commit == other.commit
    }
}

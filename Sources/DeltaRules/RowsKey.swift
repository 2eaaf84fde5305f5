import DeltaCore

/// The string a `$rows` source's rows must hold in one member for its filter to match them, for
/// one user: a store with an index on that member reads only those rows (docs/OPERATIONS.md,
/// "Users"). The source's filter still decides; the key only narrows what is read.
public struct RowsKey: Sendable, Equatable {
    /// The member: a plain name (a letter or `_`, then letters, digits and `_`).
    public let member: String
    /// The string it must equal.
    public let value: String

    /// Creates one.
    public init(member: String, value: String) {
        self.member = member
        self.value = value
    }
}

extension RowsKey {
    /// The name a store gives its index on `member` of `collection`'s rows (the same on every
    /// backend): `rules_key_` and a short hash of `indexKey`.
    public static func indexName(_ collection: CollectionName, _ member: String) -> String {
        "rules_key_" + SHA256.shortHex(Array(indexKey(collection, member).utf8))
    }

    /// How a store notes the index on `member` of `collection`'s rows among those it has:
    /// the collection, a newline, the member.
    public static func indexKey(_ collection: CollectionName, _ member: String) -> String {
        collection.rawValue + "\n" + member
    }
}

extension Rules {
    /// The key indexes these rules' `$rows` sources may be read through, by `RowsKey.indexName`:
    /// one per source collection and `RowsSource.keyMember`.
    public var keyIndexes: [String: (collection: CollectionName, member: String)] {
        var indexes: [String: (collection: CollectionName, member: String)] = [:]
        for source in collections.values.flatMap(\.sources) {
            guard let member = source.keyMember else { continue }
            indexes[RowsKey.indexName(source.collection, member)] = (source.collection, member)
        }
        return indexes
    }
}

extension RowsSource {
    /// The member a store may index this source's rows by: the first `eq` of the source's filter
    /// (the filter itself, or one of the conjuncts of its top-level `and`) with a claim or a
    /// literal string; nil when there is none or its name is not plain.
    public var keyMember: String? { keyComparison?.member }

    /// The key for `claims`: the `keyMember` comparison's value, when it is a string for them;
    /// nil otherwise (then every row of the collection is read).
    public func key(for claims: Claims) -> RowsKey? {
        guard let (member, value) = keyComparison, case .string(let text)? = value.scalar(claims, rows: { _ in [] }) else { return nil }
        return RowsKey(member: member, value: text)
    }

    private var keyComparison: (member: String, value: RuleValue)? {
        let conjuncts: [RuleFilter]
        if case .and(let filters) = filter { conjuncts = filters } else { conjuncts = [filter] }
        for conjunct in conjuncts {
            guard case .compare(let member, .eq, let value) = conjunct, Self.isPlain(member) else { continue }
            switch value {
            case .claim, .literal(.string): return (member, value)
            default: continue
            }
        }
        return nil
    }

    /// Whether `name` is a letter or `_`, then letters, digits and `_` (ASCII).
    static func isPlain(_ name: String) -> Bool {
        guard let first = name.utf8.first, first == UInt8(ascii: "_") || (first | 0x20) >= UInt8(ascii: "a") && (first | 0x20) <= UInt8(ascii: "z")
        else { return false }
        return name.utf8.allSatisfy { byte in
            byte == UInt8(ascii: "_") || (byte | 0x20) >= UInt8(ascii: "a") && (byte | 0x20) <= UInt8(ascii: "z")
                || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
        }
    }
}

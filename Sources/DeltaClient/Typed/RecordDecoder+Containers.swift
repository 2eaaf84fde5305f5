import Foundation

/// An object's members, by key.
struct KeyedRecordContainer<Key: CodingKey>: KeyedDecodingContainerProtocol {
    let decoder: RecordDecoder
    let members: [RecordDecoder.Member]
    var codingPath: [any CodingKey] { decoder.codingPath }
    var allKeys: [Key] {
        members.compactMap { member in
            Key(stringValue: String(decoding: UnsafeBufferPointer(rebasing: decoder.bytes[member.keyStart..<member.keyEnd]), as: UTF8.self))
        }
    }

    func contains(_ key: Key) -> Bool { member(key) != nil }

    /// The member named `key`: its name is read once, then compared as bytes.
    func member(_ key: Key) -> RecordDecoder.Member? {
        var name = key.stringValue
        return name.withUTF8 { wanted in
            for member in members where decoder.matches(member, wanted) { return member }
            return nil
        }
    }

    /// The member `key`'s value, for a primitive (no coding path of its own).
    func value(_ key: Key) throws -> RecordDecoder {
        guard let member = member(key) else { throw RecordDecoder.Unsupported() }
        return decoder.primitive(member.start, member.end)
    }

    /// The member `key`'s value, for a nested container or model (with its coding path).
    func nested(_ key: Key) throws -> RecordDecoder {
        guard let member = member(key) else { throw RecordDecoder.Unsupported() }
        return decoder.nested(member.start, member.end, key)
    }

    func decodeNil(forKey key: Key) throws -> Bool { try decoder.guarded { try value(key).isNull } }
    func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool { try decoder.guarded { try value(key).bool() } }
    func decode(_ type: String.Type, forKey key: Key) throws -> String { try decoder.guarded { try value(key).string() } }
    func decode(_ type: Double.Type, forKey key: Key) throws -> Double { try decoder.guarded { try value(key).floating(Double.self) } }
    func decode(_ type: Float.Type, forKey key: Key) throws -> Float { try decoder.guarded { try value(key).floating(Float.self) } }
    func decode(_ type: Int.Type, forKey key: Key) throws -> Int { try decoder.guarded { try value(key).integer(Int.self) } }
    func decode(_ type: Int8.Type, forKey key: Key) throws -> Int8 { try decoder.guarded { try value(key).integer(Int8.self) } }
    func decode(_ type: Int16.Type, forKey key: Key) throws -> Int16 { try decoder.guarded { try value(key).integer(Int16.self) } }
    func decode(_ type: Int32.Type, forKey key: Key) throws -> Int32 { try decoder.guarded { try value(key).integer(Int32.self) } }
    func decode(_ type: Int64.Type, forKey key: Key) throws -> Int64 { try decoder.guarded { try value(key).integer(Int64.self) } }
    func decode(_ type: UInt.Type, forKey key: Key) throws -> UInt { try decoder.guarded { try value(key).integer(UInt.self) } }
    func decode(_ type: UInt8.Type, forKey key: Key) throws -> UInt8 { try decoder.guarded { try value(key).integer(UInt8.self) } }
    func decode(_ type: UInt16.Type, forKey key: Key) throws -> UInt16 { try decoder.guarded { try value(key).integer(UInt16.self) } }
    func decode(_ type: UInt32.Type, forKey key: Key) throws -> UInt32 { try decoder.guarded { try value(key).integer(UInt32.self) } }
    func decode(_ type: UInt64.Type, forKey key: Key) throws -> UInt64 { try decoder.guarded { try value(key).integer(UInt64.self) } }
    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T {
        try decoder.guarded {
            // An array of strings (tags, names) is read directly: no container, no coding paths.
            if T.self == [String].self { return try value(key).strings() as! T }
            return try nested(key).decode(T.self)
        }
    }

    func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type, forKey key: Key) throws -> KeyedDecodingContainer<NestedKey> {
        try decoder.guarded { try nested(key).container(keyedBy: type) }
    }
    func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer { try decoder.guarded { try nested(key).unkeyedContainer() } }
    func superDecoder() throws -> any Decoder { try decoder.guarded { throw RecordDecoder.Unsupported() } }
    func superDecoder(forKey key: Key) throws -> any Decoder { try decoder.guarded { throw RecordDecoder.Unsupported() } }
}

/// An array's elements, in order.
struct UnkeyedRecordContainer: UnkeyedDecodingContainer {
    /// An element's place in the coding path.
    struct Index: CodingKey {
        let intValue: Int?
        var stringValue: String { "Index \(intValue ?? 0)" }
        init(intValue: Int) { self.intValue = intValue }
        init?(stringValue: String) { nil }
    }

    let decoder: RecordDecoder
    let elements: [(start: Int, end: Int)]
    var currentIndex = 0
    var codingPath: [any CodingKey] { decoder.codingPath }
    var count: Int? { elements.count }
    var isAtEnd: Bool { currentIndex >= elements.count }

    init(decoder: RecordDecoder, elements: [(start: Int, end: Int)]) {
        self.decoder = decoder
        self.elements = elements
    }

    mutating func next() throws -> RecordDecoder {
        guard !isAtEnd else { throw RecordDecoder.Unsupported() }
        let element = elements[currentIndex]
        defer { currentIndex += 1 }
        return decoder.nested(element.start, element.end, Index(intValue: currentIndex))
    }

    /// The next element, for a primitive (no coding path of its own).
    mutating func nextPrimitive() throws -> RecordDecoder {
        guard !isAtEnd else { throw RecordDecoder.Unsupported() }
        let element = elements[currentIndex]
        currentIndex += 1
        return decoder.primitive(element.start, element.end)
    }

    mutating func decodeNil() throws -> Bool {
        guard !isAtEnd else {
            decoder.fallback.needed = true
            throw RecordDecoder.Unsupported()
        }
        let element = elements[currentIndex]
        if decoder.primitive(element.start, element.end).isNull {
            currentIndex += 1
            return true
        }
        return false
    }

    mutating func decode(_ type: Bool.Type) throws -> Bool { try decoder.guarded { try nextPrimitive().bool() } }
    mutating func decode(_ type: String.Type) throws -> String { try decoder.guarded { try nextPrimitive().string() } }
    mutating func decode(_ type: Double.Type) throws -> Double { try decoder.guarded { try nextPrimitive().floating(Double.self) } }
    mutating func decode(_ type: Float.Type) throws -> Float { try decoder.guarded { try nextPrimitive().floating(Float.self) } }
    mutating func decode(_ type: Int.Type) throws -> Int { try decoder.guarded { try nextPrimitive().integer(Int.self) } }
    mutating func decode(_ type: Int8.Type) throws -> Int8 { try decoder.guarded { try nextPrimitive().integer(Int8.self) } }
    mutating func decode(_ type: Int16.Type) throws -> Int16 { try decoder.guarded { try nextPrimitive().integer(Int16.self) } }
    mutating func decode(_ type: Int32.Type) throws -> Int32 { try decoder.guarded { try nextPrimitive().integer(Int32.self) } }
    mutating func decode(_ type: Int64.Type) throws -> Int64 { try decoder.guarded { try nextPrimitive().integer(Int64.self) } }
    mutating func decode(_ type: UInt.Type) throws -> UInt { try decoder.guarded { try nextPrimitive().integer(UInt.self) } }
    mutating func decode(_ type: UInt8.Type) throws -> UInt8 { try decoder.guarded { try nextPrimitive().integer(UInt8.self) } }
    mutating func decode(_ type: UInt16.Type) throws -> UInt16 { try decoder.guarded { try nextPrimitive().integer(UInt16.self) } }
    mutating func decode(_ type: UInt32.Type) throws -> UInt32 { try decoder.guarded { try nextPrimitive().integer(UInt32.self) } }
    mutating func decode(_ type: UInt64.Type) throws -> UInt64 { try decoder.guarded { try nextPrimitive().integer(UInt64.self) } }
    mutating func decode<T: Decodable>(_ type: T.Type) throws -> T { try decoder.guarded { try next().decode(T.self) } }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type) throws -> KeyedDecodingContainer<NestedKey> {
        try decoder.guarded { try next().container(keyedBy: type) }
    }
    mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer { try decoder.guarded { try next().unkeyedContainer() } }
    mutating func superDecoder() throws -> any Decoder { try decoder.guarded { throw RecordDecoder.Unsupported() } }
}

/// One value.
struct SingleRecordValue: SingleValueDecodingContainer {
    let decoder: RecordDecoder
    var codingPath: [any CodingKey] { decoder.codingPath }

    func decodeNil() -> Bool { decoder.isNull }
    func decode(_ type: Bool.Type) throws -> Bool { try decoder.guarded { try decoder.bool() } }
    func decode(_ type: String.Type) throws -> String { try decoder.guarded { try decoder.string() } }
    func decode(_ type: Double.Type) throws -> Double { try decoder.guarded { try decoder.floating(Double.self) } }
    func decode(_ type: Float.Type) throws -> Float { try decoder.guarded { try decoder.floating(Float.self) } }
    func decode(_ type: Int.Type) throws -> Int { try decoder.guarded { try decoder.integer(Int.self) } }
    func decode(_ type: Int8.Type) throws -> Int8 { try decoder.guarded { try decoder.integer(Int8.self) } }
    func decode(_ type: Int16.Type) throws -> Int16 { try decoder.guarded { try decoder.integer(Int16.self) } }
    func decode(_ type: Int32.Type) throws -> Int32 { try decoder.guarded { try decoder.integer(Int32.self) } }
    func decode(_ type: Int64.Type) throws -> Int64 { try decoder.guarded { try decoder.integer(Int64.self) } }
    func decode(_ type: UInt.Type) throws -> UInt { try decoder.guarded { try decoder.integer(UInt.self) } }
    func decode(_ type: UInt8.Type) throws -> UInt8 { try decoder.guarded { try decoder.integer(UInt8.self) } }
    func decode(_ type: UInt16.Type) throws -> UInt16 { try decoder.guarded { try decoder.integer(UInt16.self) } }
    func decode(_ type: UInt32.Type) throws -> UInt32 { try decoder.guarded { try decoder.integer(UInt32.self) } }
    func decode(_ type: UInt64.Type) throws -> UInt64 { try decoder.guarded { try decoder.integer(UInt64.self) } }
    func decode<T: Decodable>(_ type: T.Type) throws -> T { try decoder.guarded { try decoder.decode(T.self) } }
}

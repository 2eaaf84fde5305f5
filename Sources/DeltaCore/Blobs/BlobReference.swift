/// A record's reference to a blob: a member whose value is exactly
/// `{"$blob": "<sha256 hex>", "size": N, "type": "image/jpeg"}` (docs/PROTOCOL.md, "Files").
///
/// A reference may stand at any depth of a record (a member of a nested object, an element of
/// an array). Any object with a `"$blob"` member is a reference and must have this form.
public struct BlobReference: Sendable, Hashable {
    /// The blob's name.
    public let hash: BlobHash
    /// Its length in bytes.
    public let size: Int64
    /// Its media type, as uploaded (`Content-Type`).
    public let type: String

    /// The largest `size` a reference may state: 2^53 − 1, exact in every JSON reader.
    public static let maximumSize: Int64 = (1 << 53) - 1

    /// Creates a reference.
    public init(hash: BlobHash, size: Int64, type: String) {
        self.hash = hash
        self.size = size
        self.type = type
    }

    /// Reads a reference from its JSON object; throws `WireError(.blob)` naming what is wrong.
    public init(_ value: JSONValue) throws {
        guard case .object(let members) = value, let name = value["$blob"] else {
            throw WireError(.blob, "a reference must be an object with a \"$blob\" member")
        }
        let extra = members.map(\.key).filter { !["$blob", "size", "type"].contains($0) }
        guard extra.isEmpty else {
            throw WireError(.blob, "a reference has exactly the members \"$blob\", \"size\" and \"type\"", evidence: "also \(extra.joined(separator: ", "))")
        }
        guard case .string(let hex) = name else {
            throw WireError(.blob, "\"$blob\" must be a string", evidence: "found \(name.kindName)")
        }
        let hash = try BlobHash(hex)
        guard case .number(let digits)? = value["size"], let size = Int64(digits), (0...Self.maximumSize).contains(size) else {
            throw WireError(
                .blob, "\"size\" must be a whole number of bytes from 0 to 2^53 - 1",
                evidence: value["size"].map { String(decoding: $0.canonicalBytes, as: UTF8.self) } ?? "missing")
        }
        guard case .string(let type)? = value["type"], BlobReference.isMediaType(type) else {
            throw WireError(
                .blob, "\"type\" must be a media type such as \"image/jpeg\"",
                evidence: value["type"].map { String(decoding: $0.canonicalBytes, as: UTF8.self) } ?? "missing")
        }
        self.init(hash: hash, size: size, type: type)
    }

    /// The reference as JSON, in canonical member order.
    public var json: JSONValue {
        .object([
            JSONMember(key: "$blob", value: .string(hash.hex)),
            JSONMember(key: "size", value: .number(String(size))),
            JSONMember(key: "type", value: .string(type)),
        ])
    }

    /// Whether `text` looks like a media type: `type/subtype`, optional parameters, printable
    /// ASCII, at most 255 bytes (what a `Content-Type` header may carry back).
    public static func isMediaType(_ text: String) -> Bool {
        let bytes = Array(text.utf8)
        guard (3...255).contains(bytes.count), bytes.allSatisfy({ (0x20...0x7E).contains($0) }) else { return false }
        let essence = text.split(separator: ";", maxSplits: 1, omittingEmptySubsequences: false)[0]
        let parts = essence.split(separator: "/", omittingEmptySubsequences: false)
        return parts.count == 2 && parts.allSatisfy { !$0.isEmpty && !$0.contains(" ") }
    }
}

extension BlobReference: Codable {
    private enum CodingKeys: String, CodingKey {
        case hash = "$blob"
        case size
        case type
    }

    /// Decodes `{"$blob": …, "size": …, "type": …}`, checked as `init(_:)` checks it.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        let hash = try BlobHash(try container.decode(String.self, forKey: .hash))
        let size = try container.decode(Int64.self, forKey: .size)
        let type = try container.decode(String.self, forKey: .type)
        guard (0...Self.maximumSize).contains(size), Self.isMediaType(type) else {
            throw WireError(.blob, "a reference needs a size from 0 to 2^53 - 1 and a media type", evidence: "size \(size), type \(String(reflecting: type))")
        }
        self.init(hash: hash, size: size, type: type)
    }

    /// Encodes the three members.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(hash.hex, forKey: .hash)
        try container.encode(size, forKey: .size)
        try container.encode(type, forKey: .type)
    }
}

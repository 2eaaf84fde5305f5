/// The first line of a snapshot: what it holds and the exact server token of each collection.
public struct SnapshotManifest: Sendable, Equatable {
    /// The format name written in every snapshot.
    public static let formatName = "deltasnap-snapshot"
    /// The newest format version this build writes: 2.0 when the snapshot carries blobs, else 1.1
    /// when a collection carries a state digest, else 1.0.
    public static let currentVersion = SnapshotVersion(major: 2, minor: 0)
    /// The major versions this build reads: 1 (records) and 2 (records, then blobs).
    public static let readableMajors = 1...2

    /// One collection in the snapshot.
    public struct Entry: Sendable, Equatable {
        /// The collection's name.
        public let name: CollectionName
        /// The server's `ETag` for the state baked, exactly as the server sent it.
        public let entityTag: String
        /// The server's `Last-Modified` for the state baked, exactly as the server sent it.
        public let lastModified: String
        /// How many records follow for this collection.
        public let records: Int
        /// The collection's state digest at `entityTag` (format 1.1); readers check the records against it.
        public let digest: StateDigest?

        /// Creates a collection entry.
        public init(name: CollectionName, entityTag: String, lastModified: String, records: Int, digest: StateDigest? = nil) {
            self.name = name
            self.entityTag = entityTag
            self.lastModified = lastModified
            self.records = records
            self.digest = digest
        }
    }

    /// The format version of the file.
    public let version: SnapshotVersion
    /// The collections, sorted by name, each at most once.
    public let collections: [Entry]
    /// Whether a blob section follows the records (format 2): the bytes of every blob the
    /// records reference, each checked against its hash (docs/SNAPSHOT-FORMAT.md, *Blobs*).
    public var hasBlobs: Bool { version.major == 2 }

    /// Creates a manifest at the version its content needs (2.0 with `blobs`, else 1.1 or 1.0);
    /// collections are sorted by name.
    public init(collections: [Entry], blobs: Bool = false) throws {
        let sorted = collections.sorted { $0.name < $1.name }
        for (previous, next) in zip(sorted, sorted.dropFirst()) where previous.name == next.name {
            throw WireError(.snapshot, "a collection appears twice in the manifest", evidence: next.name.rawValue)
        }
        self.version =
            blobs ? Self.currentVersion : SnapshotVersion(major: 1, minor: sorted.contains { $0.digest != nil } ? 1 : 0)
        self.collections = sorted
    }

    /// The total number of records.
    public var totalRecords: Int { collections.reduce(0) { $0 + $1.records } }

    /// The manifest line's canonical JSON (without the newline).
    public var canonicalBytes: [UInt8] {
        JSONValue.object([
            JSONMember(
                key: "collections",
                value: .array(
                    collections.map { collection in
                        .object(
                            (collection.digest.map { [JSONMember(key: "digest", value: .string($0.hex))] } ?? []) + [
                                JSONMember(key: "etag", value: .string(collection.entityTag)),
                                JSONMember(key: "lastModified", value: .string(collection.lastModified)),
                                JSONMember(key: "name", value: .string(collection.name.rawValue)),
                                JSONMember(key: "records", value: .number(String(collection.records))),
                            ])
                    })),
            JSONMember(key: "format", value: .string(Self.formatName)),
            JSONMember(key: "version", value: .string(version.description)),
        ]).canonicalBytes
    }

    /// Parses a manifest line; refuses other formats and newer major versions.
    public init(parsing line: some Swift.Collection<UInt8>) throws {
        let value: JSONValue
        do { value = try JSONValue(parsing: line) } catch { throw WireError(.snapshot, "the manifest line is not JSON", evidence: "\(error)") }
        guard case .string(Self.formatName) = value["format"] else {
            throw WireError(
                .snapshot, "not a DeltaSnapshot snapshot",
                evidence: "format is \(value["format"].map { String(decoding: $0.canonicalBytes, as: UTF8.self) } ?? "missing")")
        }
        guard case .string(let versionText) = value["version"], let version = SnapshotVersion(versionText) else {
            throw WireError(.snapshot, "the manifest has no valid version")
        }
        guard Self.readableMajors.contains(version.major) else {
            throw WireError(
                .snapshot, "format version \(version) is not readable by this build",
                evidence:
                    "this build reads 1.x and 2.x; \(version.major > Self.readableMajors.upperBound ? "update DeltaSnapshot" : "re-bake the snapshot")"
            )
        }
        guard case .array(let items) = value["collections"] else { throw WireError(.snapshot, "the manifest has no collections list") }
        var collections: [Entry] = []
        for item in items {
            guard case .string(let name) = item["name"], case .string(let tag) = item["etag"],
                case .string(let date) = item["lastModified"], case .number(let count) = item["records"], let records = Int(count), records >= 0
            else {
                throw WireError(
                    .snapshot, "a manifest collection lacks name, etag, lastModified or records",
                    evidence: String(decoding: item.canonicalBytes.prefix(200), as: UTF8.self))
            }
            var digest: StateDigest?
            if let value = item["digest"] {
                guard case .string(let text) = value, let parsed = StateDigest(hex: text) else {
                    throw WireError(.snapshot, "a manifest collection's digest is not 64 lowercase hex digits", evidence: name)
                }
                digest = parsed
            }
            collections.append(Entry(name: try CollectionName(name), entityTag: tag, lastModified: date, records: records, digest: digest))
        }
        guard collections.map(\.name) == collections.map(\.name).sorted(), Set(collections.map(\.name)).count == collections.count else {
            throw WireError(.snapshot, "manifest collections must be unique and sorted by name")
        }
        self.version = version
        self.collections = collections
    }
}

/// A snapshot format version, `major.minor`: readers accept any minor of their major.
public struct SnapshotVersion: Sendable, Equatable, CustomStringConvertible {
    /// Incompatible changes bump this.
    public let major: Int
    /// Compatible additions bump this.
    public let minor: Int

    /// Creates a version.
    public init(major: Int, minor: Int) {
        self.major = major
        self.minor = minor
    }

    /// Parses `major.minor` (digits only).
    public init?(_ text: String) {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 2, let major = Int(parts[0]), let minor = Int(parts[1]), major >= 0, minor >= 0,
            parts.allSatisfy({ $0.allSatisfy(\.isASCII) && $0.allSatisfy(\.isNumber) })
        else { return nil }
        self.init(major: major, minor: minor)
    }

    /// `major.minor`.
    public var description: String { "\(major).\(minor)" }
}

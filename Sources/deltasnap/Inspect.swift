import ArgumentParser
import DeltaCore
import Foundation

/// `deltasnap inspect`: show what a snapshot holds.
struct Inspect: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show a snapshot's manifest, counts and sizes (and verify it on the way).",
        discussion: "With --json, prints one JSON object for scripts."
    )

    @Argument(help: ArgumentHelp("The snapshot file.", valueName: "file"))
    var file: String

    @Flag(help: "Print JSON instead of text.")
    var json = false

    func run() async throws {
        let (manifest, _, size, reader) = try verifySnapshot(file)
        guard let digest = reader.contentDigest else { throw CommandFailure("\(file): not verified") }
        // Format 2.0's blob section, read and checked on the way.
        let blobs =
            manifest.hasBlobs
            ? [JSONMember(key: "blobBytes", value: .number(String(reader.blobBytes))), JSONMember(key: "blobs", value: .number(String(reader.blobCount)))] : []
        if json {
            let value = JSONValue.object(
                blobs + [
                    JSONMember(
                        key: "collections",
                        value: .array(
                            manifest.collections.map { entry in
                                // The state digest the records were checked against (computed when the manifest has none).
                                .object([
                                    JSONMember(key: "digest", value: .string((entry.digest ?? reader.digests[entry.name] ?? .empty).hex)),
                                    JSONMember(key: "etag", value: .string(entry.entityTag)),
                                    JSONMember(key: "lastModified", value: .string(entry.lastModified)),
                                    JSONMember(key: "name", value: .string(entry.name.rawValue)),
                                    JSONMember(key: "records", value: .number(String(entry.records))),
                                ])
                            })),
                    JSONMember(key: "compressedBytes", value: .number(String(size))),
                    JSONMember(key: "contentBytes", value: .number(String(reader.contentBytes))),
                    JSONMember(key: "records", value: .number(String(manifest.totalRecords))),
                    JSONMember(key: "sha256", value: .string(digest)),
                    JSONMember(key: "version", value: .string(manifest.version.description)),
                ])
            print(String(decoding: value.canonicalBytes, as: UTF8.self))
            return
        }
        print("snapshot \(file): format \(manifest.version), \(manifest.totalRecords) records, \(size) bytes (\(reader.contentBytes) uncompressed), verified")
        print("sha256 \(digest)")
        if manifest.hasBlobs { print("  blobs: \(reader.blobCount), \(reader.blobBytes) bytes, each checked against its hash") }
        for entry in manifest.collections {
            print("  \(entry.name): \(entry.records) records, ETag \(entry.entityTag), Last-Modified \(entry.lastModified)")
            print(
                "    state digest \((entry.digest ?? reader.digests[entry.name] ?? .empty).hex)\(entry.digest == nil ? " (computed: the manifest has none)" : "")"
            )
        }
    }
}

import ArgumentParser
import DeltaClient
import DeltaCore
import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// `deltasnap blob`: a blob's bytes, from a replica or from the server.
struct Blob: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Write a blob's bytes to a file: the replica's copy, or downloaded from the server.",
        discussion: """
            SHA256 is the blob's name, the "$blob" of a record's reference. The replica's own \\
            copy is used when it holds one (attached there, or downloaded before); otherwise, with \\
            --url, the blob is downloaded from the server (GET /blobs/SHA256, with the client key or \\
            the user's token) and checked against its name before --out is written. --out is \\
            written whole or not at all.

            Examples:
              deltasnap blob --store replica.sqlite 9f86d0…0a08 --out photo.jpg
              deltasnap blob --store replica.sqlite 9f86d0…0a08 --out photo.jpg --url http://127.0.0.1:8080/api
            """
    )

    @OptionGroup var local: LocalStore

    @Argument(help: ArgumentHelp("The blob's SHA-256, 64 lowercase hex digits.", valueName: "sha256"))
    var sha256: String

    @Option(help: ArgumentHelp("The file to write.", valueName: "file"))
    var out: String

    @Option(help: ArgumentHelp("The server's API root (http://HOST:PORT/api), to download a blob the replica does not hold.", valueName: "url"))
    var url: String?

    @Option(help: ArgumentHelp("The key the server gives apps (default: $DELTASNAP_CLIENT_KEY).", valueName: "key"))
    var clientKey: String?

    @Option(help: ArgumentHelp("The user's JSON Web Token, for a server with rules (default: $DELTASNAP_TOKEN).", valueName: "jwt"))
    var token: String?

    func run() async throws {
        let hash: BlobHash
        do { hash = try BlobHash(sha256) } catch { throw CommandFailure("\(sha256.prefix(80)): \(error)") }
        if let local = try local.files().localBlob(hash) {
            try Self.copy(local, hash, to: out)
            print("\(out): the replica's copy of \(hash)")
            return
        }
        guard let url, let root = URL(string: url), root.scheme != nil else {
            throw CommandFailure("blob \(hash): the replica does not hold it (give --url to download it from the server)")
        }
        var request = URLRequest(url: root.deletingLastPathComponent().appendingPathComponent("blobs").appendingPathComponent(hash.hex))
        let environment = ProcessInfo.processInfo.environment
        if let bearer = token ?? environment["DELTASNAP_TOKEN"] ?? clientKey ?? environment["DELTASNAP_CLIENT_KEY"] {
            request.setValue("Bearer \(bearer)", forHTTPHeaderField: "Authorization")
        }
        let (file, response) = try await URLSession.shared.download(for: request)
        defer { try? FileManager.default.removeItem(at: file) }
        let status = (response as? HTTPURLResponse)?.statusCode ?? 0
        guard status == 200 else { throw CommandFailure("blob \(hash): the server answered \(status) (\(request.url?.absoluteString ?? ""))") }
        try Self.copy(file, hash, to: out)
        print("\(out): downloaded \(hash)")
    }

    /// Copies `source` to `out` through a temporary file, checking that its bytes are `hash`.
    static func copy(_ source: URL, _ hash: BlobHash, to out: String) throws {
        guard let input = try? FileHandle(forReadingFrom: source) else { throw CommandFailure("blob \(hash): cannot read \(source.path)") }
        defer { try? input.close() }
        let output = try AtomicOutput(path: out)
        var digest = SHA256()
        do {
            while let piece = try input.read(upToCount: 1 << 20), !piece.isEmpty {
                digest.update(piece)
                try output.write(Array(piece))
            }
        } catch {
            output.abandon()
            throw CommandFailure("\(out): cannot write (\(error))")
        }
        let received = BlobHash(digest: digest.finalize())
        guard received == hash else {
            output.abandon()
            throw CommandFailure("blob \(hash): the bytes are another blob's (their SHA-256 is \(received)); \(out) not written")
        }
        try output.commit()
    }
}

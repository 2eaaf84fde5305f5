import ArgumentParser
import DeltaClient
import DeltaCore
import DeltaSQLite
import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// `deltasnap blob`: a blob's bytes, from a replica or from the server.
struct Blob: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Write a blob's bytes to a file: the replica's copy, or downloaded from the server.",
        discussion: """
            SHA256 is the blob's name, the "$blob" of a record's reference. The replica's own \
            copy is used when it holds one (attached there, or downloaded before); otherwise the \
            replica downloads it from the server it last synced with (or --url): GET \
            /blobs/SHA256, with the client key or the user's token, as an app's replica does, in \
            8 MiB pieces that a cut or a kill keeps, so running the command again asks only for \
            the rest, and checked against its name before the replica keeps it. --out is written \
            whole or not at all.

            Examples:
              deltasnap blob --store replica.sqlite 9f86d0…0a08 --out photo.jpg
              deltasnap blob --store replica.sqlite 9f86d0…0a08 --out photo.jpg --token-file user.jwt
            """
    )

    @OptionGroup var local: LocalStore

    @Argument(help: ArgumentHelp("The blob's SHA-256, 64 lowercase hex digits.", valueName: "sha256"))
    var sha256: String

    @Option(help: ArgumentHelp("The file to write.", valueName: "file"))
    var out: String

    @Option(
        help: ArgumentHelp(
            "The server's API root (http://HOST:PORT/api), to download a blob the replica does not hold (default: the server the store last synced with).",
            valueName: "url"))
    var url: String?

    @OptionGroup var credentials: ClientCredentialOptions

    func run() async throws {
        let hash: BlobHash
        do { hash = try BlobHash(sha256) } catch { throw CommandFailure("\(sha256.prefix(80)): \(error)") }
        if let local = try local.files().localBlob(hash) {
            try Self.copy(local, hash, to: out)
            print("\(out): the replica's copy of \(hash)")
            return
        }
        let store = try Connection(path: local.store, mode: .readOnly)
        guard let address = try url ?? store.text("SELECT value FROM sync_state WHERE key = 'server'") else {
            throw CommandFailure("blob \(hash): the replica does not hold it, and the store never synced with a server (give --url to download it)")
        }
        guard let root = URL(string: address), let scheme = root.scheme?.lowercased(), ["http", "https"].contains(scheme), root.host != nil else {
            throw CommandFailure(
                url == nil
                    ? "the server the store last synced with (\(address)) is not an http or https URL; give --url"
                    : "--url \(address): not an http or https URL")
        }
        guard let snapshot = try store.text("SELECT value FROM sync_state WHERE key = 'snapshot'") else {
            throw CommandFailure("\(local.store): no snapshot recorded; sync it first")
        }
        var configuration = ReplicaConfiguration(
            storeURL: URL(fileURLWithPath: local.store), snapshotURL: URL(fileURLWithPath: snapshot), serverURL: root)
        credentials.apply(to: &configuration)
        let bearer = try await configuration.credentials?() ?? configuration.clientKey
        let reference = try await Self.reference(hash, root: root, bearer: bearer)
        let file: URL
        do {
            file = try await Replica.open(configuration).blob(reference)
        } catch let error as ReplicaError {
            throw CommandFailure("blob \(hash): \(error)")
        }
        try Self.copy(file, hash, to: out)
        print("\(out): downloaded \(hash)")
    }

    /// The blob's size and type, from `HEAD /blobs/SHA256` with the credential.
    static func reference(_ hash: BlobHash, root: URL, bearer: String?) async throws -> BlobReference {
        var request = URLRequest(url: root.deletingLastPathComponent().appendingPathComponent("blobs").appendingPathComponent(hash.hex))
        request.httpMethod = "HEAD"
        if let bearer { request.setValue("Bearer \(bearer)", forHTTPHeaderField: "Authorization") }
        let (_, response) = try await URLSession.shared.data(for: request)
        let http = response as? HTTPURLResponse
        guard let http, http.statusCode == 200 else {
            throw CommandFailure("blob \(hash): the server answered \(http?.statusCode ?? 0) (\(request.url?.absoluteString ?? ""))")
        }
        guard let size = http.value(forHTTPHeaderField: "Content-Length").flatMap({ Int64($0) }) else {
            throw CommandFailure("blob \(hash): the server's answer has no Content-Length (\(request.url?.absoluteString ?? ""))")
        }
        return BlobReference(hash: hash, size: size, type: http.value(forHTTPHeaderField: "Content-Type") ?? "application/octet-stream")
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

import DeltaCore
import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

extension Bake {
    /// `--write-token`, else `$DELTASNAP_WRITE_TOKEN` when set and not empty.
    var ownerSecret: String? {
        writeToken ?? ProcessInfo.processInfo.environment["DELTASNAP_WRITE_TOKEN"].flatMap { $0.isEmpty ? nil : $0 }
    }

    /// Records the baked tokens on the server (`POST /bakes`, the owner's secret), so that
    /// `deltasnap compact` keeps them valid. Without a secret it says what that risks, and goes on;
    /// with one, a refusal fails the command (the snapshot itself is already in place).
    func recordOnServer(_ text: String, _ manifest: SnapshotManifest) async throws {
        guard let secret = ownerSecret else {
            FileHandle.standardError.write(
                Data(
                    ("bake: the baked token is not recorded on the server (no --write-token or DELTASNAP_WRITE_TOKEN): "
                        + "deltasnap compact may expire it while apps ship this snapshot\n").utf8))
            return
        }
        guard let api = URL(string: text)?.deletingLastPathComponent().deletingLastPathComponent() else { return }
        var request = URLRequest(url: api.appendingPathComponent("bakes"))
        request.httpMethod = "POST"
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        request.setValue("Bearer \(secret)", forHTTPHeaderField: "Authorization")
        let entries = manifest.collections.map { entry in
            JSONValue.object([JSONMember(key: "collection", value: .string(entry.name.rawValue)), JSONMember(key: "token", value: .string(entry.entityTag))])
        }
        request.httpBody = Data(JSONValue.object([JSONMember(key: "bakes", value: .array(entries))]).canonicalBytes)
        let (data, response): (Data, URLResponse)
        do {
            (data, response) = try await URLSession.shared.data(for: request)
        } catch {
            throw CommandFailure("\(request.url!.absoluteString): cannot record the baked token (\(error.localizedDescription)); the snapshot is in place")
        }
        guard let http = response as? HTTPURLResponse, http.statusCode == 200 else {
            let status = (response as? HTTPURLResponse)?.statusCode ?? 0
            let detail = String(decoding: data.prefix(300), as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
            throw CommandFailure(
                "\(request.url!.absoluteString): the server refused to record the baked token (\(status): \(detail)); the snapshot is in place")
        }
    }
}

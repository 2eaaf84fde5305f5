import DeltaCore
import DeltaRules
import DeltaStore
import HTTPTypes
import Hummingbird
import NIOCore

/// `POST /push`: an app's queued writes, each applied exactly once, in order (docs/PROTOCOL.md).
///
/// Needs the client key (or the owner's secret, or a user's token under rules); a mutation in a
/// collection that credential may not write is answered `denied` (rule `collection`), the others
/// go on. A user on a server without rules, which gives users no writes, gets `403 not-writable`. Malformed
/// bodies get `400`; ids that do not continue the client's sequence get `409 mutation-sequence`;
/// a client id another principal pushed with first gets `403 client-owned`; nothing is changed
/// by any of these. Answers show only what the credential may read (`Push.apply`).
struct PushRoute: RulesPinned {
    let store: any ChangeReader & ChangeWriter
    /// The settings; `rules` pinned for each request (`RulesPinned`).
    var configuration: ServerConfiguration
    let metrics: ServerMetrics

    /// Applies the push. A user's is decided under one version of the rules: the one pinned for
    /// the request, or, when the write transaction found the database under newer ones (nothing
    /// applied), those, checked again from the start (`decidingAgainOnNewerRules`).
    func handle(_ request: Request, context: some RequestContext, credential: Credential) async throws -> Response {
        let body = try await collect(request, configuration)
        let push = try PushRequest(parsing: body.readableBytesView).limited(to: configuration.recordSize)
        let answer = try await decidingAgainOnNewerRules(store) { configuration -> PushResponse in
            // A collection the pusher may not write is each mutation's `denied` (rule `collection`),
            // recorded like any answer: one bad write never wedges the mutations behind it.
            return try await Push.apply(push, to: store, as: try credential.principal(configuration))
        }
        for result in answer.results { metrics.pushed(result.status.rawValue) }
        if case .user(let claims) = credential {
            metrics.refusals.record(push, answer.results, user: claims.subject)
        } else {
            metrics.refusals.record(push, answer.results, user: nil)
        }
        var bytes = answer.json.canonicalBytes
        bytes.append(UInt8(ascii: "\n"))
        return Response(
            status: .ok,
            headers: [.contentType: "application/json", .cacheControl: "no-store", .contentLength: String(bytes.count)],
            body: .init(byteBuffer: ByteBuffer(bytes: bytes)))
    }
}

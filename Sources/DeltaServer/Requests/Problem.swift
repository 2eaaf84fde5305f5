import DeltaCore
import DeltaStore
import Foundation
import HTTPTypes
public import Hummingbird
import Logging
import NIOHTTP1

/// The one public error type of `DeltaServer`: an RFC 9457 problem, sent as `application/problem+json`.
///
/// `type` is an identifier (`urn:deltasnap:problem:<name>`), not a link; `detail` reads
/// `what: why (evidence)` like every other error in DeltaSnapshot.
public struct Problem: HTTPResponseError, Sendable, CustomStringConvertible {
    /// The HTTP status.
    public let status: HTTPResponse.Status
    /// The problem's short name, e.g. `invalid-record`; `type` is `urn:deltasnap:problem:<name>`.
    public let name: String
    /// A human-readable explanation of this occurrence.
    public let detail: String
    /// Extra members of the problem object, e.g. `reason` for resets, `record` for a `412`.
    public let extensions: [(String, JSONValue)]
    /// Extra response headers.
    public let headers: HTTPFields

    /// Creates a problem.
    public init(_ status: HTTPResponse.Status, _ name: String, _ detail: String, extensions: [(String, String)] = [], headers: HTTPFields = [:]) {
        self.init(status, name, detail, values: extensions.map { ($0.0, JSONValue.string($0.1)) }, headers: headers)
    }

    /// Creates a problem whose extra members are any JSON values.
    public init(_ status: HTTPResponse.Status, _ name: String, _ detail: String, values: [(String, JSONValue)], headers: HTTPFields = [:]) {
        self.status = status
        self.name = name
        self.detail = detail
        self.extensions = values
        self.headers = headers
    }

    /// The problem's `type` URI.
    public var type: String { "urn:deltasnap:problem:\(name)" }

    /// `status name: detail`.
    public var description: String { "\(status.code) \(name): \(detail)" }

    /// The JSON body.
    public var body: [UInt8] {
        var members: [JSONMember] = [
            JSONMember(key: "type", value: .string(type)),
            JSONMember(key: "title", value: .string(status.reasonPhrase)),
            JSONMember(key: "status", value: .number(String(status.code))),
            JSONMember(key: "detail", value: .string(detail)),
        ]
        for (key, value) in extensions { members.append(JSONMember(key: key, value: value)) }
        var out: [UInt8] = []
        // Keys in the RFC's order, not sorted: this is a message for people.
        JSONValue.writeObject(members, into: &out)
        out.append(UInt8(ascii: "\n"))
        return out
    }

    /// The response for this problem.
    public func response(from request: Request, context: some RequestContext) throws -> Response {
        var fields = headers
        fields[.contentType] = "application/problem+json"
        fields[.cacheControl] = "no-store"
        let bytes = body
        fields[.contentLength] = String(bytes.count)
        return Response(status: status, headers: fields, body: .init(byteBuffer: ByteBuffer(bytes: bytes)))
    }
}

extension Problem {
    /// 400 for a request the server cannot use.
    static func badRequest(_ name: String, _ detail: String) -> Problem { Problem(.badRequest, name, detail) }

    /// The problem for any error thrown while handling a request. A `5xx` says what failed in
    /// general terms only: the store's error names its file, its database URL or the server's
    /// directories, which are the operator's to read (`ProblemMiddleware` logs the error), not the
    /// client's.
    static func from(_ error: any Error) -> Problem {
        switch error {
        case let problem as Problem:
            return problem
        case let error as WireError:
            let name =
                switch error.kind {
                case .collectionName: "invalid-collection"
                case .push: "invalid-push"
                case .filter: "invalid-filter"
                case .blob: "invalid-blob"
                default: "invalid-record"
                }
            return Problem(.badRequest, name, error.description)
        case let error as StoreError:
            switch error.kind {
            case .notFound: return Problem(.notFound, "not-found", error.description)
            case .invalidWrite: return Problem(.badRequest, "invalid-write", error.description)
            case .mutationSequence:
                return Problem(
                    .conflict, "mutation-sequence", error.description,
                    values: [("lastMutationId", .number(String(error.lastMutation ?? 0)))])
            case .clientOwned: return Problem(.forbidden, "client-owned", error.description)
            case .blobHash: return Problem(.unprocessableContent, "blob-hash", error.description)
            case .tooLarge: return Problem(.contentTooLarge, "too-large", error.description)
            case .uploadOffset:
                return Problem(.conflict, "upload-offset", error.description, headers: [BlobRoute.uploadOffsetField: String(error.keptBytes ?? 0)])
            case .rulesMismatch: return Problem(.serviceUnavailable, "rules-mismatch", error.description)
            case .unavailable, .incompatible, .corrupt:
                return Problem(.serviceUnavailable, "store-unavailable", "store: the database cannot be used now (the server logged why)")
            }
        case let error as HTTPParserError:
            return Problem(.badRequest, "malformed-request", "request: not HTTP/1.1 (\(error))")
        case let error as HTTPError:
            switch error.status {
            case .contentTooLarge: return Problem(.contentTooLarge, "too-large", "request body: larger than the server accepts")
            case .notFound: return Problem(.notFound, "not-found", "path: no such route (see docs/PROTOCOL.md)")
            default: return Problem(error.status, "http-error", error.status.code < 500 ? (error.body ?? error.status.reasonPhrase) : error.status.reasonPhrase)
            }
        default:
            return Problem(.internalServerError, "internal", "server: unexpected failure (the server logged it)")
        }
    }
}

/// Turns every error thrown below it into a problem response, so nothing leaves as a bare 500.
struct ProblemMiddleware<Context: RequestContext>: RouterMiddleware {
    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            return try await next(request, context)
        } catch {
            let problem = Problem.from(error)
            if problem.status.code >= 500 {
                context.logger.error("request failed", metadata: ["path": "\(request.uri.path)", "error": "\(error)"])
            }
            throw problem
        }
    }
}

import DeltaCore
import DeltaServer
import DeltaStore
import DeltaTestSupport
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOCore
import Testing

/// How a test reaches the server: through the router in-process, or over real HTTP on loopback.
enum Transport: String, CaseIterable, Sendable, CustomStringConvertible {
    case inProcess
    case loopback
    var description: String { rawValue }
    var setup: TestingSetup { self == .inProcess ? .router : .live }
}

/// The secret the test servers accept for writes.
let secret = "test-secret-123"

/// Runs `body` against a server over a fresh, empty store of `backend`.
func withServer<T: Sendable>(
    _ transport: Transport = .loopback,
    backend: Backend = .sqlite,
    configure: (inout ServerConfiguration) -> Void = { _ in },
    _ body: @escaping @Sendable (any TestClientProtocol, any ChangeStore) async throws -> T
) async throws -> T {
    var configuration = ServerConfiguration()
    configuration.port = 0
    configuration.writeToken = secret
    // The test's own connection to the server can sit idle while the test starts nginx or Varnish
    // on a loaded machine; the 60 s default once closed it under CI ("I/O on closed channel").
    configuration.idleTimeout = .seconds(600)
    configure(&configuration)
    let settings = configuration
    return try await backend.withStore { store, _ in
        let app = buildApplication(store: store, earlyVerdicts: store, configuration: settings)
        return try await app.testOnServerThreads(transport.setup) { client in try await body(client, store) }
    }
}

extension TestClientProtocol {
    /// GET with optional headers.
    func get(_ path: String, _ headers: HTTPFields = [:]) async throws -> TestResponse {
        try await execute(uri: path, method: .get, headers: headers)
    }

    /// A Prometheus sample's value from `/metrics`, by its whole name with labels (0 when absent).
    func metric(_ name: String) async throws -> Int {
        let text = String(buffer: try await get("/metrics").body)
        let line = text.split(separator: "\n").first { $0.hasPrefix(name + " ") }
        // A gauge's value is written as a float ("3.0").
        return line.flatMap { Double($0.split(separator: " ").last ?? "") }.map { Int($0) } ?? 0
    }

    /// A write with the test secret and a JSON body.
    func write(_ method: HTTPRequest.Method, _ path: String, _ json: String, auth: String? = "Bearer \(secret)") async throws -> TestResponse {
        var headers: HTTPFields = [.contentType: "application/json"]
        if let auth { headers[.authorization] = auth }
        return try await execute(uri: path, method: method, headers: headers, body: ByteBuffer(string: json))
    }
}

/// A response as the tests look at it, from either the test framework or a raw `TestClient`.
struct HTTPReply: Sendable {
    let status: Int
    let headers: HTTPFields
    let bytes: [UInt8]
    func header(_ name: String) -> String? { headers[HTTPField.Name(name)!] }
    var text: String { String(decoding: bytes, as: UTF8.self) }

    /// The same reply with a gzip body decoded.
    func decoded() throws -> HTTPReply {
        guard headers[.contentEncoding] == "gzip" else { return self }
        return HTTPReply(status: status, headers: headers, bytes: try gunzip(bytes))
    }
}

extension TestClient {
    /// Runs one request on this connection.
    func send(_ uri: String, _ method: HTTPRequest.Method, headers: HTTPFields = [:], body: String? = nil) async throws -> HTTPReply {
        let response = try await execute(
            TestClient.Request(uri, method: method, authority: "127.0.0.1", headers: headers, body: body.map { ByteBuffer(string: $0) }))
        let bytes = response.body.map { Array($0.readableBytesView) } ?? []
        return HTTPReply(status: Int(response.status.code), headers: response.headers, bytes: bytes)
    }
}

extension TestResponse {
    /// As an `HTTPReply`.
    var reply: HTTPReply { HTTPReply(status: Int(status.code), headers: headers, bytes: bytes) }

    /// The body as text.
    var text: String { body.getString(at: body.readerIndex, length: body.readableBytes) ?? "" }
    /// The body's bytes.
    var bytes: [UInt8] { body.getBytes(at: body.readerIndex, length: body.readableBytes) ?? [] }
    /// A header by name.
    func header(_ name: String) -> String? { headers[HTTPField.Name(name)!] }
}

/// A client's view of one collection, kept the way docs/PROTOCOL.md tells a client to.
struct ModelReplica: Sendable {
    var records: [String: String] = [:]  // id -> canonical body of visible records
    var etag: String?
    var lastModified: String?
    var resets = 0

    /// The state digest (`Delta-Digest`) of visible records, id -> canonical body.
    static func digest(of records: [String: String]) -> String {
        StateDigest(bodies: records.values.map { Array($0.utf8) }).hex
    }

    /// Applies one response; returns false when the response tells the client to reset.
    mutating func apply(_ response: HTTPReply, sentETag: String?) throws -> Bool {
        switch response.status {
        case 304:
            etag = response.header("ETag")
            lastModified = response.header("Last-Modified")
            return true
        case 409:
            resets += 1
            records = [:]
            etag = nil
            lastModified = nil
            return false
        case 200:
            let value = try JSONValue(parsing: response.bytes)
            guard case .object(let members) = value, members.count == 1, case .array(let items) = members[0].value else {
                throw TestFailure("bad body \(response.text.prefix(200))")
            }
            let mode = response.header("Delta-Mode")
            if mode == "full" {
                records = [:]
            } else {
                guard mode == "delta", response.header("Delta-Base") == sentETag else {
                    throw TestFailure("delta for another base: \(String(describing: response.header("Delta-Base"))) vs \(String(describing: sentETag))")
                }
            }
            for item in items {
                let record = try Record(value: item)
                if record.hidden {
                    records[record.id] = nil
                } else {
                    records[record.id] = String(decoding: record.body, as: UTF8.self)
                }
            }
            etag = response.header("ETag")
            lastModified = response.header("Last-Modified")
            return true
        default:
            throw TestFailure("unexpected status \(response.status): \(response.text.prefix(300))")
        }
    }
}

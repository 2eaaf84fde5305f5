import DeltaAuthoring
import DeltaCore
import DeltaSQLite
import DeltaTestSupport
import Foundation
import HTTPTypes
import Hummingbird
import NIOCore

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// What the proxy does to one answer on its way from the server to the client.
enum Tamper: Sendable {
    /// Cuts the body in half (the answer arrives complete, its content does not).
    case truncate
    /// Sends the body gzip-compressed but with bytes flipped in the middle, without `Content-Encoding`.
    case corruptGzip
    /// The same, labelled `Content-Encoding: gzip`, so that the HTTP stack itself fails to decode it.
    case corruptGzipEncoded
    /// Replaces the first record with an object that has no `"id"`.
    case wrongShape
    /// Says the delta was computed from another token (`Delta-Base`).
    case otherBase
    /// Forwards the request without its validators, as a cache that drops them: the server answers full.
    case dropValidators
    /// Answers this status itself, with an optional `Retry-After`.
    case status(Int, retryAfter: String?)
    /// Waits this long before answering at all (a server or network that hangs).
    case stall(Duration)
    /// Mutates the body by a seeded random edit (see `Mutation`).
    case mutate(UInt64)
    /// Rewrites the plain body (a cache or a bug that serves valid but wrong bytes); headers stay.
    case rewrite(@Sendable (String) -> String)
    /// Forwards a push, lets the server commit it, then holds the answer this long (the client
    /// times out first: an answer lost after the server committed).
    case loseAnswer(Duration)
}

/// A seeded random edit of a body: truncation, flipped, inserted or deleted bytes, on the plain
/// body or on its gzip encoding (labelled `Content-Encoding: gzip` or not).
struct Mutation {
    /// The body to send, and whether it is labelled gzip.
    static func apply(_ seed: UInt64, to plain: [UInt8]) throws -> (body: [UInt8], gzipLabel: Bool) {
        var random = SeededGenerator(seed: seed)
        func index(_ count: Int) -> Int { count == 0 ? 0 : Int(random.next() % UInt64(count)) }
        let kind = random.next() % 6
        var body = kind >= 4 ? try gzip(plain) : plain
        switch kind % 4 {
        case 0: body = Array(body.prefix(index(body.count)))
        case 1: for _ in 0...(random.next() % 3) where !body.isEmpty { body[index(body.count)] ^= UInt8(truncatingIfNeeded: random.next() | 1) }
        case 2: body.insert(contentsOf: (0..<(1 + random.next() % 8)).map { _ in UInt8(truncatingIfNeeded: random.next()) }, at: index(body.count + 1))
        default:
            let start = index(body.count)
            body.removeSubrange(start..<min(body.count, start + 1 + index(40)))
        }
        return (body, kind == 5)
    }
}

/// A request as the proxy saw it.
struct SeenRequest: Sendable {
    let ifNoneMatch: String?
    let ifModifiedSince: String?
    let acceptEncoding: String?
    var deltaClient: String? = nil
}

/// A real HTTP proxy on loopback in front of the real server, which tampers with the next answers.
final class TamperingProxy: Sendable {
    private let plans = Locked<[Tamper]>([])
    private let seen = Locked<[SeenRequest]>([])
    private let sent = Locked<[(body: [UInt8], gzipLabel: Bool)]>([])
    let upstream: Int

    init(upstream: Int) { self.upstream = upstream }

    /// Tampers with the next answers, one plan per answer, in order.
    func plan(_ tampers: Tamper...) { plans.withLock { $0.append(contentsOf: tampers) } }

    /// Forgets the plans not used yet.
    func clearPlans() { plans.withLock { $0.removeAll() } }

    /// The bodies sent so far, and whether each was labelled gzip.
    var bodies: [(body: [UInt8], gzipLabel: Bool)] { sent.withLock { $0 } }

    /// The requests seen so far.
    var requests: [SeenRequest] { seen.withLock { $0 } }

    /// The router: `GET /api/{collection}` forwarded with its validators.
    func router() -> Router<BasicRequestContext> {
        let router = Router(context: BasicRequestContext.self)
        router.get("/api/:collection") { request, context in try await self.forward(request, context) }
        router.post("/push") { request, context in try await self.forwardPush(request, context) }
        return router
    }

    private func forward(_ request: Request, _ context: BasicRequestContext) async throws -> Response {
        let collection = context.parameters.get("collection") ?? ""
        seen.withLock {
            $0.append(
                SeenRequest(
                    ifNoneMatch: request.headers[.ifNoneMatch], ifModifiedSince: request.headers[.ifModifiedSince],
                    acceptEncoding: request.headers[.acceptEncoding],
                    deltaClient: request.headers[HTTPField.Name("Delta-Client")!]))
        }
        let tamper = plans.withLock { $0.isEmpty ? nil : $0.removeFirst() }
        if case .stall(let duration) = tamper { try await Task.sleep(for: duration) }
        if case .status(let code, let retryAfter) = tamper {
            var headers: HTTPFields = [.contentType: "text/plain"]
            if let retryAfter { headers[.retryAfter] = retryAfter }
            return Response(status: .init(code: code), headers: headers, body: .init(byteBuffer: ByteBuffer(string: "tampered \(code)")))
        }
        var upstreamRequest = URLRequest(url: URL(string: "http://127.0.0.1:\(upstream)/api/\(collection)")!)
        upstreamRequest.cachePolicy = .reloadIgnoringLocalCacheData
        if case .dropValidators = tamper {
        } else {
            upstreamRequest.setValue(request.headers[.ifNoneMatch], forHTTPHeaderField: "If-None-Match")
            upstreamRequest.setValue(request.headers[.ifModifiedSince], forHTTPHeaderField: "If-Modified-Since")
        }
        upstreamRequest.setValue(request.headers[HTTPField.Name("Delta-Client")!], forHTTPHeaderField: "Delta-Client")
        let (data, response) = try await Self.session.data(for: upstreamRequest)
        let http = response as! HTTPURLResponse
        var headers: HTTPFields = [:]
        for name in ["ETag", "Last-Modified", "Delta-Mode", "Delta-Base", "Delta-Reset", "Content-Type", "Retry-After", "Delta-Last-Mutation", "Delta-Digest"] {
            if let value = http.value(forHTTPHeaderField: name) { headers[HTTPField.Name(name)!] = value }
        }
        var body = Array(data)
        switch tamper {
        case .truncate: body = Array(body.prefix(body.count / 2))
        case .corruptGzip, .corruptGzipEncoded:
            body = try gzip(body)
            for index in stride(from: 12, to: body.count - 8, by: 7) { body[index] ^= 0x5A }
            if case .corruptGzipEncoded = tamper { headers[.contentEncoding] = "gzip" }
        case .wrongShape:
            let text = String(decoding: body, as: UTF8.self).replacingOccurrences(of: "[{\"", with: "[{\"name\":\"no id\"},{\"", options: [], range: nil)
            body = Array(text.utf8)
        case .otherBase: headers[HTTPField.Name("Delta-Base")!] = "W/\"1.0000000000000001.1.00000001\""
        case .rewrite(let change):
            body = Array(change(String(decoding: body, as: UTF8.self)).utf8)
        case .mutate(let seed):
            let (mutated, gzipLabel) = try Mutation.apply(seed, to: body)
            body = mutated
            if gzipLabel { headers[.contentEncoding] = "gzip" }
        case .dropValidators, .status, .stall, .loseAnswer, nil: break
        }
        let label = headers[.contentEncoding] == "gzip"
        sent.withLock { $0.append((body, label)) }
        return Response(status: .init(code: http.statusCode), headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: body)))
    }

    /// Pushes seen so far.
    var pushes: Int { pushCount.withLock { $0 } }
    private let pushCount = Locked(0)

    /// `POST /push` forwarded with its key and body; `.loseAnswer` holds the answer after the server committed.
    private func forwardPush(_ request: Request, _ context: BasicRequestContext) async throws -> Response {
        pushCount.withLock { $0 += 1 }
        let tamper = plans.withLock { $0.isEmpty ? nil : $0.removeFirst() }
        if case .status(let code, let retryAfter) = tamper {
            var headers: HTTPFields = [.contentType: "text/plain"]
            if let retryAfter { headers[.retryAfter] = retryAfter }
            return Response(status: .init(code: code), headers: headers, body: .init(byteBuffer: ByteBuffer(string: "tampered \(code)")))
        }
        var upstreamRequest = URLRequest(url: URL(string: "http://127.0.0.1:\(upstream)/push")!)
        upstreamRequest.httpMethod = "POST"
        upstreamRequest.setValue(request.headers[.authorization], forHTTPHeaderField: "Authorization")
        upstreamRequest.setValue("application/json", forHTTPHeaderField: "Content-Type")
        upstreamRequest.httpBody = Data(try await request.body.collect(upTo: 64 << 20).readableBytesView)
        let (data, response) = try await Self.session.data(for: upstreamRequest)
        if case .loseAnswer(let duration) = tamper { try await Task.sleep(for: duration) }
        let http = response as! HTTPURLResponse
        return Response(
            status: .init(code: http.statusCode), headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(bytes: Array(data))))
    }

    private static let session: URLSession = {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.urlCache = nil
        return URLSession(configuration: configuration)
    }()
}

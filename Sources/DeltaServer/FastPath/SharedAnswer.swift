import HTTPTypes
import Hummingbird
import Logging
import NIOConcurrencyHelpers
import NIOCore

/// One answer of the router's, computed once and sent to every request of a `WaitingRoom` group:
/// live clients that all wait on the same token, asking with the same bytes, get the same delta
/// (or `HEAD`'s status and fields) when it changes, from one database read.
///
/// The request goes through the whole router (its middleware, the one place that authenticates,
/// `ReadPolicy`), as the group's header block says it (its `Authorization` too), without
/// `?wait=`. The bytes are the router's answer as
/// HTTP/1.1 writes it, the body framed by `Content-Length`; each request sent them gets its own
/// `Date` (`NotModifiedBeforeDecoding+Waiting`).
struct SharedAnswer: Sendable {
    /// The status code.
    let status: Int
    /// The status line and the fields, `Content-Length` included, up to the `Date` field.
    let head: ByteBuffer
    /// The body (empty for a `HEAD`).
    let body: ByteBuffer

    /// True inside the router while it computes a shared answer: `RequestMetricsMiddleware` leaves
    /// the request uncounted, as each request sent the answer is counted when it is sent.
    @TaskLocal static var computing = false

    /// How a `WaitingRoom` computes answers with `responder` (the application's router): nil when
    /// the header block cannot be made a request exactly as NIO would read it, when the router
    /// throws, or when the body is over `maximumBodyBytes` (each request then goes to the router).
    static func computer<Responder: HTTPResponder>(responder: Responder, logger: Logger, maximumBodyBytes: Int) -> WaitingRoom.Compute
    where Responder.Context == BasicRequestContext {
        { request, headerBlock, channel in
            guard let head = headerBlock.withUnsafeReadableBytes({ request.withoutWait(headerBlock: $0) }) else { return nil }
            let context = BasicRequestContext(source: .init(channel: channel, logger: logger))
            let sink = Sink(limit: maximumBodyBytes)
            let response: Response
            do {
                response = try await $computing.withValue(true) {
                    try await responder.respond(to: Request(head: head, body: RequestBody(buffer: ByteBuffer())), context: context)
                }
                try await response.body.write(Collector(sink: sink))
            } catch {
                return nil
            }
            guard let body = sink.bytes else { return nil }
            var fields = response.headers
            // Framed by its length, as the router's answers with a body are by chunks; a 304 or 204
            // names none on the wire (NIO's encoder drops the one its response carries).
            if [204, 304].contains(response.status.code) {
                fields[.contentLength] = nil
            } else if fields[.contentLength] == nil {
                fields[.contentLength] = String(body.readableBytes)
            }
            let status = response.status
            return SharedAnswer(
                status: status.code, head: ByteBuffer(string: "HTTP/1.1 \(status.code) \(status.reasonPhrase)\r\n" + fields.http1Lines),
                body: request.isHead ? ByteBuffer() : body)
        }
    }

    /// The bytes a body wrote, up to a limit.
    final class Sink: Sendable {
        private let buffer = NIOLockedValueBox<ByteBuffer?>(ByteBuffer())
        private let limit: Int

        init(limit: Int) { self.limit = limit }

        func append(_ bytes: ByteBuffer) {
            buffer.withLockedValue { buffer in
                guard buffer != nil else { return }
                if buffer!.readableBytes + bytes.readableBytes > limit { buffer = nil } else { buffer!.writeImmutableBuffer(bytes) }
            }
        }

        /// Everything written, or nil when it grew past the limit.
        var bytes: ByteBuffer? { buffer.withLockedValue { $0 } }
    }

    /// The body writer that collects into a `Sink`.
    struct Collector: ResponseBodyWriter {
        let sink: Sink

        mutating func write(_ buffer: ByteBuffer) async throws { sink.append(buffer) }
        consuming func finish(_ trailingHeaders: HTTPFields?) async throws {}
    }
}

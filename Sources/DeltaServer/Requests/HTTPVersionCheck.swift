import NIOCore
import NIOHTTP1

/// Refuses a request that is not HTTP/1.1 (an HTTP/1.0 one: NIO's decoder refuses other major
/// versions itself) before it reaches the router, as docs/PROTOCOL.md says: `400
/// malformed-request`, answered by `MalformedRequestAnswer` after the answers to the requests
/// before it, and the connection closes. The answers this server sends are HTTP/1.1 (chunked
/// bodies, kept connections, `304`s from the raw bytes) and an HTTP/1.0 client cannot read them.
///
/// It sits between NIO's HTTP/1 messages and the HTTP types codec, which drops the version. The
/// refused request's parts, and every part after them, go no further.
final class HTTPVersionCheck: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart

    /// Whether a request was refused: the connection reads nothing more.
    private var refused = false

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !refused else { return }
        if case .head(let head) = unwrapInboundIn(data), head.version != .http1_1 {
            refused = true
            context.fireErrorCaught(HTTPParserError.invalidVersion)
            return
        }
        context.fireChannelRead(data)
    }
}

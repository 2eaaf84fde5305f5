import HTTPTypes
import NIOCore
import NIOHTTPTypes

/// Writes the connection's peer address into a decoded request's fields, for the one reader that
/// needs it: the console's sign-in, which slows wrong secrets per address (`SignInThrottle`).
/// The router's request context does not carry the channel, so the address travels in a field
/// that this handler always overwrites: whatever a client sends under that name is removed first,
/// on every request, so no client can choose the address it is counted under.
final class PeerAddress: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart

    /// The field's name: set by this server only.
    static let field = HTTPField.Name("Deltasnap-Peer-Address")!

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard case .head(var request) = unwrapInboundIn(data) else {
            context.fireChannelRead(data)
            return
        }
        request.headerFields[values: Self.field] = []
        request.headerFields[Self.field] = context.channel.remoteAddress?.ipAddress ?? "unknown"
        context.fireChannelRead(wrapInboundOut(.head(request)))
    }
}

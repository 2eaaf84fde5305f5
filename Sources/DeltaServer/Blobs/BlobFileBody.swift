import NIOCore
import NIOHTTP1

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Sends a blob's bytes from its file with `sendfile` (a NIO `FileRegion`): the kernel copies
/// them to the socket without passing through the process, as nginx serves static files.
///
/// `BlobRoute` answers a blob kept in a local file with an empty body of the right length and an
/// internal `marker` header naming the file and the range; this handler, between NIO's HTTP/1
/// encoder and the HTTP types codec, removes the header and writes the range before the end of
/// the response. The header never leaves the process: it is set by that route alone, and the
/// router used without this channel (in-process tests) never sets it.
final class BlobFileBody: ChannelOutboundHandler, RemovableChannelHandler {
    typealias OutboundIn = HTTPServerResponsePart
    typealias OutboundOut = HTTPServerResponsePart

    /// The internal header: `<offset> <count> <path>`.
    static let marker = "deltasnap-internal-blob-file"

    private var pending: (path: String, offset: Int, count: Int)?

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        switch unwrapOutboundIn(data) {
        case .head(var head) where head.headers.contains(name: Self.marker):
            let value = head.headers[Self.marker].first ?? ""
            head.headers.remove(name: Self.marker)
            let parts = value.split(separator: " ", maxSplits: 2)
            if parts.count == 3, let offset = Int(parts[0]), let count = Int(parts[1]) { pending = (String(parts[2]), offset, count) }
            context.write(wrapOutboundOut(.head(head)), promise: promise)
        case .end(let trailers) where pending != nil:
            let file = pending!
            pending = nil
            let descriptor = open(file.path, O_RDONLY | O_CLOEXEC)
            guard descriptor >= 0 else {
                // Removed since the route looked (a compaction): the length promised cannot be kept.
                promise?.fail(ChannelError.ioOnClosedChannel)
                context.close(promise: nil)
                return
            }
            let handle = NIOFileHandle(_deprecatedTakingOwnershipOfDescriptor: descriptor)
            let region = FileRegion(fileHandle: handle, readerIndex: file.offset, endIndex: file.offset + file.count)
            context.write(wrapOutboundOut(.body(.fileRegion(region))), promise: nil)
            let ended = context.eventLoop.makePromise(of: Void.self)
            context.write(wrapOutboundOut(.end(trailers)), promise: ended)
            ended.futureResult.whenComplete { result in
                try? handle.close()
                promise?.completeWith(result)
            }
        default:
            context.write(data, promise: promise)
        }
    }
}

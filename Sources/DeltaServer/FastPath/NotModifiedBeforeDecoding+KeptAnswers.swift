import DeltaCore
import HTTPTypes
import NIOCore
import Prometheus

/// Kept cacheable answers (`AnswerCache`) from the raw bytes: a request for a cacheable read in
/// the canonical form the server's `307`s give, whose answer is kept, gets that answer's bytes
/// without the HTTP decoder, the router or a database read.
extension NotModifiedBeforeDecoding {
    /// Writes the kept answer to `request` (not flushed) and returns true; false when there is none.
    func sendKept(_ context: ChannelHandlerContext, _ request: RawRequest) -> Bool {
        guard !request.isHead, !request.hasOrigin, request.ifNoneMatch == nil, request.ifModifiedSince == nil,
            request.collection.utf8.contains(UInt8(ascii: "?"))
        else {
            return false
        }
        let gzip = request.acceptEncoding.map { acceptsGzip([.acceptEncoding: $0]) } ?? false
        guard let entry = answers.entry(AnswerCache.key(target: request.collection, gzip: gzip)) else { return false }
        var out = context.channel.allocator.buffer(capacity: entry.head.readableBytes + 40 + entry.body.readableBytes)
        out.writeImmutableBuffer(entry.head)
        out.writeImmutableBuffer(dateLine())
        out.writeImmutableBuffer(entry.body)
        context.write(wrapOutboundOut(out), promise: nil)
        metrics.request(route: "/api/{collection}", method: "GET", status: 200)
        metrics.cacheableAnswers(computed: false)
        metrics.earlyCacheable.increment()
        return true
    }
}

public import DeltaStore
public import Hummingbird
public import Logging
import NIOCore
import HummingbirdCore
import Prometheus

/// Builds the HTTP application over `store`: the delta API, writes, `/healthz` and `/metrics`.
public func buildApplication(
    store: any ChangeStore,
    configuration: ServerConfiguration = ServerConfiguration(),
    metrics: ServerMetrics = ServerMetrics(),
    logger: Logger = Logger(label: "deltasnap"),
    onServerRunning: @escaping @Sendable (_ port: Int) async -> Void = { _ in }
) -> some ApplicationProtocol {
    let answers = AnswerCache(maximumBytes: configuration.answerCacheBytes)
    let router = makeRouter(store: store, configuration: configuration, metrics: metrics, answers: answers)
    let http1: HTTP1Channel.Configuration = .init(
        additionalChannelHandlers: [NotModifiedFastPath(store: store, metrics: metrics)],
        idleTimeout: .nanoseconds(Int64(configuration.idleTimeout.components.seconds) * 1_000_000_000),
        httpDecoderConfiguration: .init(maxHeaderFieldSize: 16 << 10, maxHeaderListSize: 64 << 10, maxHeaderFieldCount: 100))
    let server = HTTPServerBuilder { responder in
        DeltaHTTP1Channel(http1: HTTP1Channel(responder: responder, configuration: http1), store: store, metrics: metrics, answers: answers)
    }
    return Application(
        router: router,
        server: server,
        configuration: .init(address: .hostname(configuration.host, port: configuration.port), serverName: nil),
        onServerRunning: { channel in await onServerRunning(channel.localAddress?.port ?? 0) },
        logger: logger
    )
}

/// The router alone, for in-process tests.
public func buildRouter(store: any ChangeStore, configuration: ServerConfiguration, metrics: ServerMetrics) -> Router<BasicRequestContext> {
    makeRouter(store: store, configuration: configuration, metrics: metrics, answers: AnswerCache(maximumBytes: configuration.answerCacheBytes))
}

/// The router, sharing `answers` with the connection handlers that send kept answers early.
func makeRouter(store: any ChangeStore, configuration: ServerConfiguration, metrics: ServerMetrics, answers: AnswerCache) -> Router<BasicRequestContext> {
    let router = Router(context: BasicRequestContext.self)
    router.add(middleware: RequestMetricsMiddleware(metrics: metrics))
    router.add(middleware: ProblemMiddleware())
    let longPoll = LongPoll(store: store, maximumWaiting: configuration.maximumWaiting)
    let read = ReadRoute(store: store, configuration: configuration, metrics: metrics, longPoll: longPoll, answers: answers)
    let writes = WriteRoutes(store: store, configuration: configuration, metrics: metrics)
    let record = RecordRoute(store: store)
    let push = PushRoute(store: store, configuration: configuration, metrics: metrics)
    router.get("/api/:collection") { request, context in try await read.handle(request, context: context) }
    router.head("/api/:collection") { request, context in try await read.handle(request, context: context, headOnly: true) }
    router.get("/api/:collection/:id") { request, context in try await record.handle(request, context: context) }
    router.post("/push") { request, context in try await push.handle(request, context: context) }
    let bakes = BakeRoute(store: store, configuration: configuration)
    router.post("/bakes") { request, context in try await bakes.handle(request, context: context) }
    let snapshots = SnapshotRoute(directory: configuration.snapshotDirectory.map { SnapshotDirectory(path: $0) })
    router.get("/snapshots/current/:collection") { request, context in try await snapshots.current(request, context: context) }
    router.get("/snapshots/:sha256") { request, context in try await snapshots.byHash(request, context: context) }
    router.post("/api/:collection") { request, context in try await writes.post(request, context: context) }
    router.put("/api/:collection/:id") { request, context in try await writes.put(request, context: context) }
    router.delete("/api/:collection/:id") { request, context in try await writes.delete(request, context: context) }
    router.get("/healthz") { _, _ -> Response in
        let head = try await store.headPosition()
        let bytes = Array("{\"position\":\(head),\"status\":\"ok\"}\n".utf8)
        return Response(status: .ok, headers: [.contentType: "application/json", .cacheControl: "no-store"], body: .init(byteBuffer: ByteBuffer(bytes: bytes)))
    }
    router.get("/metrics") { _, _ -> Response in
        metrics.headPosition.set(Int64(try await store.headPosition()))
        let text = metrics.registry.emitToBuffer()
        return Response(
            status: .ok, headers: [.contentType: "text/plain; version=0.0.4", .cacheControl: "no-store"],
            body: .init(byteBuffer: ByteBuffer(bytes: text)))
    }
    return router
}

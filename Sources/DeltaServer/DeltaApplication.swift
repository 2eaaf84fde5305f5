public import DeltaStore
public import Hummingbird
import HummingbirdCore
public import Logging
import NIOConcurrencyHelpers
import NIOCore
import Prometheus

/// Builds the HTTP application over `store`: the delta API, writes, `/healthz` and `/metrics`.
/// `earlyVerdicts` (the store itself, for both backends) lets revalidations be answered `304`
/// from the connection's bytes, before the HTTP decoder; without it they take the router.
public func buildApplication(
    store: any ChangeStore,
    earlyVerdicts: (any EarlyVerdicts)? = nil,
    configuration: ServerConfiguration = ServerConfiguration(),
    metrics: ServerMetrics = ServerMetrics(),
    logger: Logger = Logger(label: "deltasnap"),
    onServerRunning: @escaping @Sendable (_ port: Int) async -> Void = { _ in }
) -> some ApplicationProtocol {
    let answers = AnswerCache(maximumBytes: configuration.answerCacheBytes, rules: configuration.liveRules)
    // The JWK Set's reads that fail, and its replacements, go to this server's log and metrics.
    configuration.authenticator?.report(to: metrics, logger: logger)
    // The early answers read the rules as they are at each request: the followed ones, or fixed ones.
    let rules = configuration.liveRules ?? configuration.rules.map(LiveRules.init)
    let users: UserVerdicts? = earlyVerdicts.flatMap { store in
        guard let rules, let authenticator = configuration.authenticator else { return nil }
        return UserVerdicts(store: store, rules: rules, authenticator: authenticator)
    }
    let earlyVerdicts = earlyVerdicts.map { store -> any EarlyVerdicts in rules.map { PublicVerdicts(store: store, rules: $0) } ?? store }
    // Live clients' requests wait on the raw path, each group's answer computed once by the router (`WaitingRoom`).
    let responder = LateResponder()
    let room = WaitingRoom(
        verdict: { [earlyVerdicts, users] in NotModifiedBeforeDecoding.verdict($0, verdicts: earlyVerdicts, users: users) },
        compute: SharedAnswer.computer(responder: responder, logger: logger, maximumBodyBytes: max(configuration.answerCacheBytes / 8, 1 << 20)),
        metrics: metrics)
    let longPoll = LongPoll(store: store, maximumWaiting: configuration.maximumWaiting, room: room, metrics: metrics)
    let router = makeRouter(
        store: store, configuration: configuration, metrics: metrics, answers: answers, longPoll: longPoll, responder: responder, logger: logger, sendFile: true
    )
    responder.responder = router.buildResponder()
    let http1: HTTP1Channel.Configuration = .init(
        additionalChannelHandlers: [MalformedRequestAnswer()] + (earlyVerdicts.map { [NotModifiedAfterDecoding(verdicts: $0, metrics: metrics)] } ?? [])
            + [ExpectContinue(), PeerAddress()],
        // Connections' idle timeout is `ConnectionIdleness`'s (DeltaHTTP1Channel), which sees the raw path's answers too.
        idleTimeout: nil,
        // One bound for the request line and every field, so that a long target reaches the router's 414.
        httpDecoderConfiguration: .init(
            maxHeaderFieldSize: MalformedRequestAnswer.headerBytes, maxHeaderListSize: MalformedRequestAnswer.headerBytes,
            maxHeaderFieldCount: MalformedRequestAnswer.headerFields))
    let server = HTTPServerBuilder { responder in
        DeltaHTTP1Channel(
            http1: HTTP1Channel(responder: responder, configuration: http1), verdicts: earlyVerdicts, users: users, metrics: metrics, answers: answers,
            longPoll: longPoll, maximumWait: configuration.maximumWait,
            idleTimeout: .nanoseconds(Int64(configuration.idleTimeout.components.seconds) * 1_000_000_000), onEventLoops: store.runsOnEventLoops)
    }
    return Application(
        responder: responder.responder!,
        server: server,
        configuration: .init(address: .hostname(configuration.host, port: configuration.port), serverName: nil),
        onServerRunning: { channel in await onServerRunning(channel.localAddress?.port ?? 0) },
        logger: logger
    )
}

/// Builds the application and serves until the process is told to stop (SIGINT, SIGTERM), then
/// finishes the requests in flight: what `deltasnap serve` runs. With `liveRules`, it follows
/// the database's rules meanwhile (`LiveRules.follow`).
public func runServer(
    store: any ChangeStore,
    earlyVerdicts: (any EarlyVerdicts)?,
    configuration: ServerConfiguration,
    logger: Logger,
    onServerRunning: @escaping @Sendable (_ port: Int) async -> Void
) async throws {
    let app = buildApplication(store: store, earlyVerdicts: earlyVerdicts, configuration: configuration, logger: logger, onServerRunning: onServerRunning)
    guard let rules = configuration.liveRules else { return try await app.runService() }
    try await withThrowingTaskGroup(of: Void.self) { group in
        group.addTask { await rules.follow(store, logger: logger) }
        defer { group.cancelAll() }
        try await app.runService()
    }
}

/// The router alone, for in-process tests.
public func buildRouter(store: any ChangeStore, configuration: ServerConfiguration, metrics: ServerMetrics) -> Router<BasicRequestContext> {
    let responder = LateResponder()
    let router = makeRouter(
        store: store, configuration: configuration, metrics: metrics,
        answers: AnswerCache(maximumBytes: configuration.answerCacheBytes, rules: configuration.liveRules),
        longPoll: LongPoll(store: store, maximumWaiting: configuration.maximumWaiting, metrics: metrics), responder: responder,
        logger: Logger(label: "deltasnap"))
    responder.responder = router.buildResponder()
    return router
}

/// The router, sharing `answers` with the connection handlers that send kept answers early.
/// With `sendFile`, the channel has `BlobFileBody` (not so for the router alone, in-process).
/// `responder` is given the router's responder once it is built (the console reads through it).
func makeRouter(
    store: any ChangeStore, configuration: ServerConfiguration, metrics: ServerMetrics, answers: AnswerCache, longPoll: LongPoll,
    responder: LateResponder, logger: Logger, sendFile: Bool = false
) -> Router<BasicRequestContext> {
    let router = Router(context: BasicRequestContext.self)
    // An answer kept under other rules may no longer be anyone's to read: none survives a change.
    configuration.liveRules?.whenChanged { _ in answers.removeAll() }
    router.add(middleware: RequestMetricsMiddleware(metrics: metrics))
    if let crossOrigin = configuration.crossOrigin { router.add(middleware: CrossOriginMiddleware(allowed: crossOrigin)) }
    router.add(middleware: ProblemMiddleware())
    router.add(middleware: RequestTargetLimit())
    let read = ReadRoute(store: store, configuration: configuration, metrics: metrics, longPoll: longPoll, answers: answers)
    let writes = WriteRoutes(store: store, configuration: configuration, metrics: metrics)
    let record = RecordRoute(store: store, configuration: configuration)
    let push = PushRoute(store: store, configuration: configuration, metrics: metrics)
    let bakes = BakeRoute(store: store, configuration: configuration)
    let snapshots = SnapshotRoute(directory: configuration.snapshotDirectory.map { SnapshotDirectory(path: $0) })
    let operations = OperationsRoutes(store: store, metrics: metrics)
    let blobs = BlobRoute(store: store, configuration: configuration, metrics: metrics, sendFile: sendFile)
    // Each request is decided under one version of the rules, pinned at its start (`RulesPinned`):
    // reads are answered again, whole, under the database's newer rules when their transaction
    // finds it under them; writes decide again inside (a body is read once).
    // Who asks is authenticated in one place, as each route's access says (`RouteHandler.gated`):
    // a handler is given the identity its access yields and has no other way to learn it.
    for route in Route.allCases {
        let handler: RouteHandler
        switch route {
        case .read:
            handler = .reader { request, context, caller in
                try await read.underOneVersion(store) { try await $0.handle(request, context: context, caller: caller) }
            }
        case .readHead:
            handler = .reader { request, context, caller in
                try await read.underOneVersion(store) { try await $0.handle(request, context: context, caller: caller, headOnly: true) }
            }
        case .record:
            handler = .reader { request, context, caller in
                try await record.underOneVersion(store) { try await $0.handle(request, context: context, caller: caller) }
            }
        // After a write, the requests waiting for a change hear of it at once (`LongPoll.nudge`).
        case .put:
            handler = .writer {
                defer { longPoll.nudge() }
                return try await writes.pinned().put($0, context: $1, credential: $2)
            }
        case .delete:
            handler = .writer {
                defer { longPoll.nudge() }
                return try await writes.pinned().delete($0, context: $1, credential: $2)
            }
        case .batch:
            handler = .owner {
                defer { longPoll.nudge() }
                return try await writes.pinned().post($0, context: $1)
            }
        case .push:
            handler = .writer {
                defer { longPoll.nudge() }
                return try await push.pinned().handle($0, context: $1, credential: $2)
            }
        case .bakes: handler = .owner { try await bakes.handle($0, context: $1) }
        case .currentSnapshot: handler = .anyone { try await snapshots.current($0, context: $1) }
        case .snapshot: handler = .anyone { try await snapshots.byHash($0, context: $1) }
        case .blobPut:
            handler = .writer {
                try await blobs.pinned().put($0, context: $1, credential: $2)
            }
        case .blob:
            handler = .reader { request, context, caller in
                try await blobs.underOneVersion(store) { try await $0.get(request, context: context, caller: caller) }
            }
        case .blobHead:
            handler = .reader { request, context, caller in
                try await blobs.underOneVersion(store) { try await $0.get(request, context: context, caller: caller, headOnly: true) }
            }
        case .blobKept:
            handler = .writer {
                try await blobs.pinned().kept($0, context: $1, credential: $2)
            }
        case .health: handler = .anyone { _, _ in try await operations.health() }
        case .metrics: handler = .anyone { _, _ in try await operations.metrics() }
        case .openAPI: handler = .anyone { _, _ in OperationsRoutes.openAPI() }
        }
        router.on(RouterPath(route.path), method: route.method, use: handler.gated(route, configuration))
    }
    // The operator's console, signed in with the owner's secret (`--console`).
    if configuration.console, configuration.writeToken != nil {
        Console(store: store, configuration: configuration, metrics: metrics, longPoll: longPoll, responder: responder, logger: logger).register(on: router)
        // Last: it wraps the router's not-found answer alone.
        router.add(middleware: ConsoleNotFound())
    }
    return router
}

/// The router's responder, given once the router is built: the waiting room computes its answers
/// with the router (`SharedAnswer`), and the router's reads wait in the room.
final class LateResponder: HTTPResponder, Sendable {
    typealias Context = BasicRequestContext
    private let box = NIOLockedValueBox<RouterResponder<BasicRequestContext>?>(nil)

    /// The router's responder (nil until it is built).
    var responder: RouterResponder<BasicRequestContext>? {
        get { box.withLockedValue { $0 } }
        set { box.withLockedValue { $0 = newValue } }
    }

    func respond(to request: Request, context: Context) async throws -> Response {
        guard let responder else { throw HTTPError(.serviceUnavailable) }
        return try await responder.respond(to: request, context: context)
    }
}

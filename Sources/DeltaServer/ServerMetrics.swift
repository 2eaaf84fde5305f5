import Hummingbird
import NIOConcurrencyHelpers
public import Prometheus

/// The server's Prometheus metrics: requests by route and status, delta sizes, head position.
public final class ServerMetrics: Sendable {
    /// The registry `/metrics` renders.
    public let registry: PrometheusCollectorRegistry
    let deltaRecords: ValueHistogram
    let fullRecords: ValueHistogram
    let headPosition: Gauge
    /// `304`s answered from the raw bytes, before the HTTP decoder (also counted in the requests).
    let earlyNotModified: Counter
    /// Kept cacheable answers sent from the raw request bytes, before the HTTP decoder.
    let earlyCacheable: Counter
    /// Questions the raw path asked the database before answering (PostgreSQL's round trips).
    let earlyRoundTrips: Counter
    /// `307`s from a conditional read to its cacheable read.
    let redirects: Counter
    /// Requests held by `?wait=` now, on the raw path (`WaitingRoom`) and in the router (`LongPoll`).
    let waiting: Gauge
    /// Answers the router computed once for every request waiting with the same bytes (`SharedAnswer`).
    let sharedAnswers: Counter
    /// Blobs stored, uploads and downloads (`BlobMetrics`).
    let blobs: BlobMetrics
    /// Failures to read the JWK Set (`--jwks`) again, each counted once, as logged: the last good set stays in force.
    let jwksFailures: Counter
    /// 1 while the last look at the JWK Set failed (the last good set in force), else 0.
    let jwksFailing: Gauge
    /// JWK Sets that replaced the one in force with other keys: every token verified before is verified again.
    let jwksChanges: Counter
    /// Cacheable reads answered from the database (the work a cache in front saves) and from memory.
    private let cacheableComputed: Counter
    private let cacheableKept: Counter
    private let publicComputed: Counter
    private let publicKept: Counter
    private let requests = NIOLockedValueBox<[RequestKey: Counter]>([:])
    /// Pushed mutations' counters by status, and how many each counted since the server started.
    private let mutations = NIOLockedValueBox<(counters: [String: Counter], counts: [String: Int])>(([:], [:]))
    /// The last hour of requests, for the console (`TrafficHistory`).
    let traffic = TrafficHistory()
    /// The latest mutations pushes refused, for the console (`PushRefusals`).
    let refusals = PushRefusals()

    private struct RequestKey: Hashable {
        let route: String
        let method: String
        let status: Int
    }

    /// Creates the metrics in `registry` (a fresh one by default).
    public init(registry: PrometheusCollectorRegistry = PrometheusCollectorRegistry()) {
        self.registry = registry
        let sizes: [Double] = [0, 1, 10, 100, 1_000, 10_000, 100_000, 1_000_000]
        deltaRecords = registry.makeValueHistogram(
            descriptor: MetricNameDescriptor(
                metricName: "deltasnap_delta", unitName: "records", helpText: "Records per delta response (hidden ones included)."),
            buckets: sizes)
        fullRecords = registry.makeValueHistogram(
            descriptor: MetricNameDescriptor(metricName: "deltasnap_full", unitName: "records", helpText: "Records per full-dataset response."),
            buckets: sizes)
        headPosition = registry.makeGauge(
            descriptor: MetricNameDescriptor(metricName: "deltasnap_head", unitName: "position", helpText: "The newest committed position."))
        earlyNotModified = registry.makeCounter(
            descriptor: MetricNameDescriptor(
                metricName: "deltasnap_early_not_modified", unitName: "responses",
                helpText: "304 responses answered from the raw request bytes, before HTTP decoding (also counted in deltasnap_http_requests)."))
        earlyCacheable = registry.makeCounter(
            descriptor: MetricNameDescriptor(
                metricName: "deltasnap_early_cacheable", unitName: "responses",
                helpText: "Kept cacheable answers sent from the raw request bytes, before HTTP decoding (also counted in deltasnap_cacheable_answers)."))
        earlyRoundTrips = registry.makeCounter(
            descriptor: MetricNameDescriptor(
                metricName: "deltasnap_early_round_trips", unitName: "total",
                helpText:
                    "Questions the raw request path asked the database (PostgreSQL) before answering: a 304, or the router. A request a connection repeats after it was found changed is not asked again."
            ))
        redirects = registry.makeCounter(
            descriptor: MetricNameDescriptor(
                metricName: "deltasnap_cacheable_redirects", unitName: "total", helpText: "307s from a conditional read to its cacheable ?since=&until= read."))
        waiting = registry.makeGauge(
            descriptor: MetricNameDescriptor(
                metricName: "deltasnap_waiting", unitName: "requests", helpText: "Requests held by ?wait= now (live clients waiting for a change)."))
        sharedAnswers = registry.makeCounter(
            descriptor: MetricNameDescriptor(
                metricName: "deltasnap_shared_answers", unitName: "total",
                helpText:
                    "Answers computed once for every request waiting with the same bytes when their collection changed (each request sent one is counted in deltasnap_http_requests)."
            ))
        let answers = MetricNameDescriptor(
            metricName: "deltasnap_cacheable_answers", unitName: "total",
            helpText: "Cacheable ?since=&until= reads answered with a 200: computed from the database, or sent again from memory.")
        cacheableComputed = registry.makeCounter(descriptor: answers, labels: [("source", "database")])
        cacheableKept = registry.makeCounter(descriptor: answers, labels: [("source", "memory")])
        let publicAnswers = MetricNameDescriptor(
            metricName: "deltasnap_public_answers", unitName: "total",
            helpText:
                "Plain reads of a public collection's whole dataset answered with a 200 body: computed from the database, or sent again from memory (the same answer from the same token)."
        )
        publicComputed = registry.makeCounter(descriptor: publicAnswers, labels: [("source", "database")])
        publicKept = registry.makeCounter(descriptor: publicAnswers, labels: [("source", "memory")])
        blobs = BlobMetrics(registry: registry)
        jwksFailures = registry.makeCounter(
            descriptor: MetricNameDescriptor(
                metricName: "deltasnap_jwks_failures", unitName: "total",
                helpText: "JWK Set (--jwks) reads that failed (unreadable, not a usable set), each failure once: the last good set stays in force."))
        jwksFailing = registry.makeGauge(
            descriptor: MetricNameDescriptor(
                metricName: "deltasnap_jwks", unitName: "failing", helpText: "1 while the last read of the JWK Set (--jwks) failed, else 0."))
        jwksChanges = registry.makeCounter(
            descriptor: MetricNameDescriptor(
                metricName: "deltasnap_jwks_changes", unitName: "total",
                helpText: "JWK Sets (--jwks) that replaced the one in force with other keys; tokens verified before are verified again."))
    }

    /// Counts one cacheable read answered with a `200`, computed from the database or from memory.
    func cacheableAnswers(computed: Bool) {
        (computed ? cacheableComputed : cacheableKept).increment()
    }

    /// Counts one plain read of a public collection's whole dataset answered with a `200` body,
    /// computed from the database or sent again from memory (`ReadRoute+PublicAnswers`).
    func publicAnswers(computed: Bool) {
        (computed ? publicComputed : publicKept).increment()
    }

    /// Counts one pushed mutation by its result status (applied, unchanged, conflict, invalid).
    func pushed(_ status: String) {
        let counter = mutations.withLockedValue { mutations -> Counter in
            mutations.counts[status, default: 0] += 1
            if let counter = mutations.counters[status] { return counter }
            let counter = registry.makeCounter(
                descriptor: MetricNameDescriptor(
                    metricName: "deltasnap_push_mutations", unitName: "total", helpText: "Pushed mutations answered, by result status."),
                labels: [("status", status)])
            mutations.counters[status] = counter
            return counter
        }
        counter.increment()
    }

    /// How many pushed mutations this server answered with each result status since it started.
    var pushedByStatus: [String: Int] { mutations.withLockedValue { $0.counts } }

    /// Counts one finished request; with `microseconds`, how long the server took (nil: a
    /// long-poll, not timed; see `TrafficHistory`).
    func request(route: String, method: String, status: Int, microseconds: Int? = 0) {
        traffic.record(status: status, microseconds: microseconds)
        requestCounter(route: route, method: method, status: status).increment()
    }

    /// Counts one finished request whose `deltasnap_http_requests` counter the caller holds
    /// (`requestCounter`): the raw path counts the same `304` again and again, and the lookup's
    /// lock, which every event loop takes, is then skipped.
    func request(counter: Counter, status: Int) {
        traffic.record(status: status, microseconds: 0)
        counter.increment()
    }

    /// The `deltasnap_http_requests` counter of `route`, `method` and `status`, made the first time.
    func requestCounter(route: String, method: String, status: Int) -> Counter {
        let key = RequestKey(route: route, method: method, status: status)
        if let counter = requests.withLockedValue({ $0[key] }) { return counter }
        return requests.withLockedValue { requests in
            if let counter = requests[key] { return counter }
            let counter = registry.makeCounter(
                descriptor: MetricNameDescriptor(
                    metricName: "deltasnap_http_requests", unitName: "total", helpText: "HTTP requests by route, method and status."),
                labels: [("route", route), ("method", method), ("status", String(status))]
            )
            requests[key] = counter
            return counter
        }
    }
}

/// Counts every request by matched route, method and final status (problems included).
struct RequestMetricsMiddleware<Context: RequestContext>: RouterMiddleware {
    let metrics: ServerMetrics

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        // An answer computed once for many waiting requests is counted as each is sent it.
        if SharedAnswer.computing { return try await next(request, context) }
        let started = ContinuousClock.now
        // A long-poll's wait is not the server's time (`TrafficHistory`).
        let timed = !(request.uri.query?.contains("wait=") ?? false)
        func microseconds() -> Int? {
            guard timed else { return nil }
            let elapsed = ContinuousClock.now - started
            return Int(elapsed.components.seconds) * 1_000_000 + Int(elapsed.components.attoseconds / 1_000_000_000_000)
        }
        do {
            let response = try await next(request, context)
            metrics.request(
                route: context.endpointPath ?? "unmatched", method: request.method.rawValue, status: response.status.code, microseconds: microseconds())
            return response
        } catch {
            let status = (error as? any HTTPResponseError)?.status.code ?? 500
            metrics.request(route: context.endpointPath ?? "unmatched", method: request.method.rawValue, status: status, microseconds: microseconds())
            throw error
        }
    }
}

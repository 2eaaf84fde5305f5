import DeltaCore
import DeltaSQLite
import DeltaServer
import DeltaStore
import DeltaTestSupport
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Testing

@Suite("NUL (U+0000) is refused at the door in ids and claims, and SQLite binds text with its length")
struct NULTests {
    @Test("A push naming x and x\\u0000: x applied, the other invalid, and the next push goes on", arguments: Backend.available)
    func pushedIDs(backend: Backend) async throws {
        try await withUserServer(backend: backend, rules: exampleRules) { client, _ in
            let ada = try await Mint.hs256("ada")
            let body = pushBody(
                #"{"id":1,"collection":"notes","op":"put","record":{"id":"x","text":"one"},"base":null,"create":true}"#,
                #"{"id":2,"collection":"notes","op":"put","record":{"id":"x\u0000","text":"two"},"base":null,"create":true}"#, client: "ada-phone")
            let answer = try await UserPushTests.push(client, ada, body)
            #expect(answer.status == .ok, "\(answer.text)")
            #expect(answer.text.hasPrefix(#"{"lastMutationId":2,"results":[{"id":1,"status":"applied"},{"id":2,"#), "\(answer.text)")
            #expect(answer.text.contains(#""status":"invalid""#), "\(answer.text)")
            let next = pushBody(
                #"{"id":3,"collection":"notes","op":"put","record":{"id":"y","text":"three"},"base":null,"create":true}"#, client: "ada-phone")
            #expect(try await UserPushTests.push(client, ada, next).text == #"{"lastMutationId":3,"results":[{"id":3,"status":"applied"}]}"# + "\n")
            // A path id with NUL is not another spelling of a stored id.
            let record = try await client.get("/api/notes/x%00", as: secret)
            #expect(record.status == .badRequest, "\(record.text)")
            #expect(record.text.contains("NUL"))
            let put = try await client.write(.put, "/api/notes/x%00", #"{"id":"x\u0000","owner":"ada"}"#)
            #expect(put.status == .badRequest, "\(put.text)")
            let notes = try await client.get("/api/notes", as: secret)
            #expect(notes.text == #"{"notes":[{"id":"x","owner":"ada","text":"one"},{"id":"y","owner":"ada","text":"three"}]}"#)
        }
    }

    @Test("A token whose sub or another claim holds NUL is refused (401 token-malformed), naming NUL", arguments: Backend.available)
    func claims(backend: Backend) async throws {
        try await withUserServer(backend: backend, rules: exampleRules) { client, _ in
            _ = try await client.write(.post, "/api/notes", #"[{"id":"b1","owner":"b","text":"b's"}]"#)
            for payload in [#"{"sub":"b\u0000x","exp":\#(Mint.now + 60)}"#, #"{"sub":"b","teams":["r\u0000"],"exp":\#(Mint.now + 60)}"#] {
                let token = Mint.raw(header: #"{"alg":"HS256","typ":"JWT"}"#, payload: payload)
                let read = try await client.get("/api/notes", as: token)
                #expect(read.status == .unauthorized, "\(read.text)")
                #expect(read.text.contains("token-malformed") && read.text.contains("NUL"), "\(read.text)")
            }
        }
    }

    @Test("SQLite keeps and compares text past a NUL")
    func sqliteText() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("nul-\(UUID().uuidString).sqlite").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        let connection = try Connection(path: path)
        try connection.execute("CREATE TABLE t(name TEXT)")
        try connection.statement("INSERT INTO t VALUES (?)").run(.text("b\u{0}x"))
        let count = try connection.statement("SELECT count(*) FROM t WHERE name = ?")
        try count.bind([.text("b")])
        #expect(try count.step() && count.int64(0) == 0)
        count.reset()
        try count.bind([.text("b\u{0}x")])
        #expect(try count.step() && count.int64(0) == 1)
        let read = try connection.statement("SELECT name FROM t")
        #expect(try read.step() && read.string(0) == "b\u{0}x")
    }
}

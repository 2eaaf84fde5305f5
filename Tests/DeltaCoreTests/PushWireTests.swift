import DeltaCore
import Testing

@Suite("Push wire format")
struct PushWireTests {
    @Test("A push's bytes are canonical JSON and parse back to the same mutations; answers round-trip")
    func roundTrip() throws {
        let notes = try CollectionName("notes")
        let record = try Record(parsing: Array(#"{"text":"caf\u00e9 \"q\"","id":"n/1","n":1.50}"#.utf8))
        let request = PushRequest(
            client: "app \"1\"",
            mutations: [
                Mutation(id: 7, collection: notes, put: record, base: #"W/"1.00000000000000aa.3.0000000b""#, create: true),
                Mutation(id: 8, collection: notes, delete: "n\u{1}2", base: nil),
            ])
        let bytes = request.bytes
        #expect(
            String(decoding: bytes, as: UTF8.self)
                == #"{"client":"app \"1\"","mutations":[{"base":"W/\"1.00000000000000aa.3.0000000b\"","collection":"notes","create":true,"id":7,"op":"put","record":{"id":"n/1","n":1.5,"text":"café \"q\""},"recordId":"n/1"},{"base":null,"collection":"notes","id":8,"op":"delete","recordId":"n\u00012"}]}"#
        )
        #expect(try JSONValue(parsing: bytes).canonicalBytes == bytes)
        #expect(try PushRequest(parsing: bytes) == request)
        #expect(request.mutations[0].baseToken?.position == 3)
        // Servers keep these digests in their ledgers: the hashed text is part of the format.
        #expect(request.mutations[0].digest == SHA256.hash(Array("put\nnotes\nn/1\nW/\"1.00000000000000aa.3.0000000b\"\ntrue\n".utf8) + record.body))
        #expect(request.mutations[1].digest == SHA256.hash(Array("delete\nnotes\nn\u{1}2\n\nfalse\n".utf8)))
        let answer = PushResponse(
            lastMutationID: 8,
            results: [
                MutationResult(id: 7, status: .applied),
                MutationResult(
                    id: 8, status: .conflict, reason: "changed", server: Record(id: "n\u{1}2", hidden: true, canonicalBody: Array(#"{"id":"n\u00012"}"#.utf8)),
                    base: #"W/"1.00000000000000aa.4.0000000c""#),
            ])
        #expect(try PushResponse(parsing: answer.json.canonicalBytes) == answer)
        #expect(
            String(decoding: answer.json.canonicalBytes, as: UTF8.self)
                == #"{"lastMutationId":8,"results":[{"id":7,"status":"applied"},{"base":"W/\"1.00000000000000aa.4.0000000c\"","id":8,"reason":"changed","server":{"hidden":true,"id":"n\u00012"},"status":"conflict"}]}"#
        )
    }
}

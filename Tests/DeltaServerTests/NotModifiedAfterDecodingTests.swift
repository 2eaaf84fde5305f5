import HTTPTypes
import Testing

@testable import DeltaServer

@Suite("304 after the HTTP decoder: which requests it may answer")
struct NotModifiedAfterDecodingTests {
    private static func fields(_ pairs: [(String, String)]) -> HTTPFields {
        var fields = HTTPFields()
        for (name, value) in pairs { fields.append(HTTPField(name: HTTPField.Name(name)!, value: value)) }
        return fields
    }

    @Test("The validators come from one pass; a body, Delta-Client, Origin, Connection: close or a validator sent twice send the request to the router")
    func validators() {
        let tag = #"W/"1.abc.2.def""#
        let plain = NotModifiedAfterDecoding.validators(Self.fields([("Host", "x"), ("If-None-Match", tag), ("Connection", "keep-alive, x")]))
        #expect(plain == .init(ifNoneMatch: tag, ifModifiedSince: nil))
        let both = NotModifiedAfterDecoding.validators(Self.fields([("if-modified-since", "Thu, 01 Jan 1970 00:00:07 GMT"), ("IF-NONE-MATCH", tag)]))
        #expect(both == .init(ifNoneMatch: tag, ifModifiedSince: "Thu, 01 Jan 1970 00:00:07 GMT"), "names in any case")
        #expect(NotModifiedAfterDecoding.validators(Self.fields([("Host", "x")])) == .init(), "no validator: the verdict says so, not this")
        let refused: [[(String, String)]] = [
            [("If-None-Match", tag), ("Content-Length", "0")],
            [("If-None-Match", tag), ("Transfer-Encoding", "chunked")],
            [("If-None-Match", tag), ("Delta-Client", "c1")],
            [("If-None-Match", tag), ("Origin", "http://o")],
            [("If-None-Match", tag), ("Connection", "Close")],
            [("If-None-Match", tag), ("If-None-Match", tag)],
            [("If-Modified-Since", "a"), ("If-Modified-Since", "b")],
        ]
        for pairs in refused {
            #expect(NotModifiedAfterDecoding.validators(Self.fields(pairs)) == nil, "\(pairs)")
        }
    }

    @Test("The kept question is matched byte for byte, not by Unicode equivalence")
    func sameBytes() {
        let kelvin = NotModifiedAfterDecoding.Validators(ifNoneMatch: "\u{212A}", ifModifiedSince: nil)
        let k = NotModifiedAfterDecoding.Validators(ifNoneMatch: "K", ifModifiedSince: nil)
        #expect(kelvin == k, "String's == equates them")
        #expect(!kelvin.sameBytes(as: k))
        #expect(k.sameBytes(as: k))
        #expect(!k.sameBytes(as: .init()))
    }
}
